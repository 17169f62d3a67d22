"""The PostgreSQL candidate statement of `search.TsvectorSearch`: the generated tsvector of
migration 0008 for words, the pg_trgm GIN indexes of migration 0010 for substrings.

Words are prefix terms (`'word':*`), a title match the same term restricted to weight A (the
title's weight in the vector); the phrase is the words joined by `<->`. Substrings are
`LIKE '%...%'` on the title and the body's spaceless runs (column of 0020), which the trigram
indexes answer for three characters or more. The scope filter (workspace, archived) is a
plain WHERE beside the match, so only the scope's notes are candidates. The statement groups
them by which terms each holds (`search_rank.Group`: mask, count, seqs), so the ranking in
Python works per group.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import TextClause, text

from notes_server.store.models import SEARCH_VECTOR
from notes_server.store.search_rank import mask_bits
from notes_server.store.search_terms import Query

_VECTOR = f"n.{SEARCH_VECTOR}"


def _ts(name: str) -> str:
    return f"{_VECTOR} @@ to_tsquery('simple', :{name})"


def candidate_statement(query: Query, include_archived: bool) -> tuple[TextClause, dict[str, Any]]:
    """The statement and its values (all but :workspace) for this query: one row per group
    (mask, count, the seqs as an array)."""
    params: dict[str, Any] = {}
    held, titled, anyof = [], [], []
    content = set(query.content)
    for i, term in enumerate(query.terms):
        # Terms hold letters, marks and digits only (search_terms.words): nothing to escape,
        # in a tsquery or a LIKE pattern.
        if not term.substring:
            params[f"h{i}"], params[f"t{i}"] = f"'{term.text}':*", f"'{term.text}':*A"
            held.append(_ts(f"h{i}"))
            titled.append(_ts(f"t{i}"))
        else:
            params[f"l{i}"] = f"%{term.text}%"
            held.append(f"(n.title LIKE :l{i} OR n.body_spaceless LIKE :l{i})")
            titled.append(f"n.title LIKE :l{i}")
        if i in content:
            anyof.append(held[-1])
    if query.phrase is not None:
        params["phrase"] = " <-> ".join(f"'{w}'" for w in query.phrase) + ":*"
        phrase = _ts("phrase")
    else:
        phrase = "false"
    live = "" if include_archived else " AND n.archived = false"
    held_bits, title_bits, phrase_bit = mask_bits(len(query.terms))
    flags = [*zip(held, held_bits, strict=True), *zip(titled, title_bits, strict=True)]
    flags.append((phrase, phrase_bit))
    mask = " + ".join(f"CASE WHEN {c} THEN {bit}::bigint ELSE 0 END" for c, bit in flags)
    sql = (
        "SELECT mask, count(*), array_agg(seq) FROM ("
        f"SELECT n.seq AS seq, {mask} AS mask FROM notes AS n "
        f"WHERE n.workspace = :workspace{live} AND ({' OR '.join(anyof)})"
        ") AS flagged GROUP BY mask"
    )
    return text(sql), params
