"""The PostgreSQL statements of `search.TsvectorSearch`: the generated tsvector of migration 0008
and its GIN index, the twin of SQLite's FTS5 (`search.Fts5Search`) with the same tool behaviour.

Words become prefix terms ANDed (`'word':*`), as `search.fts_query` does for FTS5; `ts_rank`
weighs a title match ten times a body match (FTS5's bm25 weights 10 and 1); `ts_headline` marks
the matches in the body with `**`. The scope filter (workspace, archived) is a plain WHERE next
to the `@@` match, so pages are exact for every scope, however crowded the database; the
headline, the costly part, is computed only for the rows of the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# The full-text functions below (to_tsquery, ts_rank, ts_headline) compile only once the
# PostgreSQL dialect has registered them, so it is imported before they are built, whatever a
# process happened to import first (a search can be the first thing a fresh instance runs).
import sqlalchemy.dialects.postgresql  # noqa: F401  (registers the functions; see above)
from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    String,
    and_,
    bindparam,
    func,
    literal_column,
    select,
)

from notes_server.store.models import SEARCH_VECTOR
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS

# A word of a search query, for FTS5 and tsvector alike.
FTS_WORDS = re.compile(r"\w+", re.UNICODE)
_CONFIG: ColumnElement[Any] = literal_column("'simple'::regconfig")
_VECTOR: ColumnElement[Any] = literal_column(f"notes.{SEARCH_VECTOR}")
_QUERY = func.to_tsquery(_CONFIG, bindparam("query", type_=String))
# ts_rank's weights are {D, C, B, A}: the body (B) counts 0.1, the title (A) 1.0.
_WEIGHTS: ColumnElement[Any] = literal_column("'{0, 0, 0.1, 1.0}'::float4[]")
_HEADLINE_OPTIONS = "StartSel=**, StopSel=**, MaxWords=12, MinWords=4, ShortWord=0, MaxFragments=1"


def _statement(include_archived: bool, extra: Sequence[ColumnElement[bool]] = ()) -> Any:
    score = func.ts_rank(_WEIGHTS, _VECTOR, _QUERY, type_=Float).label("score")
    conditions = [notes.c.workspace == bindparam("workspace"), _VECTOR.op("@@")(_QUERY), *extra]
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    page = (
        select(notes.c.seq, score)
        .where(and_(*conditions))
        .order_by(score.desc(), notes.c.seq)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
        .subquery("page")
    )
    headline = func.ts_headline(_CONFIG, notes.c.body, _QUERY, _HEADLINE_OPTIONS, type_=String)
    return (
        select(*COLUMNS, headline, page.c.score)
        .join_from(notes, page, page.c.seq == notes.c.seq)
        .order_by(page.c.score.desc(), page.c.seq)
    )


_RANKED = {flag: _statement(flag) for flag in (False, True)}


def ts_query(query: str) -> str | None:
    """Free text as a safe tsquery: every word a quoted prefix term, ANDed; None if no word."""
    words = FTS_WORDS.findall(query)[:16]
    if not words:
        return None
    return " & ".join(f"'{word}':*" for word in words)


def ranked_rows(
    conn: Connection,
    params: dict[str, Any],
    include_archived: bool,
    extra: Sequence[ColumnElement[bool]] = (),
) -> Sequence[Sequence[Any]]:
    """One page of ranked matches: the note columns, the headline, the score (best first);
    ``extra``: more conditions beside the match (the tag filter)."""
    statement = _statement(include_archived, extra) if extra else _RANKED[include_archived]
    return conn.execute(statement, params).all()
