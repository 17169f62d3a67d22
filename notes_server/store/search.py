"""Keyword search over notes (or most recently updated first), scope first.

`SearchStore` is the interface. A ranked search has three steps: one statement takes the
notes of the scope (workspace, archived) that hold at least one content term of the query and
groups them by which terms each holds (`search_rank.Group`: a bit mask, a count, the seqs);
`search_rank.rank` scores the groups from the scope's own statistics and sorts only the seqs
of the groups that reach the page; one more statement reads the notes of the page. Each
term's membership is one index query evaluated once per statement (a set), never once per
note. Words are matched
through the word index (SQLite FTS5 `unicode61`, diacritics folded; PostgreSQL's tsvector),
substrings of scripts written without spaces through the trigram index (FTS5 `trigram`;
`pg_trgm`), or, for one or two characters, by a scan of the scope's own notes. The scope
filter sits in the candidate statement, so another workspace never enters the ranking: on
SQLite the scope is part of every FTS5 rowid (migration 0025), so each term's match reads only
the scope's rowid range and no match is joined to `notes`.
Other databases get the portable LIKE fallback (`LikeSearch`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, and_, bindparam, func, or_, select

from notes_server.store.engine import (
    CoreRun,
    DriverRead,
    DriverRun,
    driver_connection,
    uses_driver,
)
from notes_server.store.models import (
    ARCHIVED_SHIFT,
    FTS_TABLE,
    SCOPE_SHIFT,
    SCOPE_TABLE,
    SEQ_MASK,
    TRIGRAM_TABLE,
)
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS, NEWEST_FIRST, NoteRecord
from notes_server.store.search_pg import candidate_statement
from notes_server.store.search_rank import Group, Ranked, mask_bits, rank, snippet
from notes_server.store.search_terms import Query, parse
from notes_server.store.tags import having_all


@dataclass(frozen=True, slots=True)
class SearchHit:
    note: NoteRecord
    snippet: str
    # Higher is better (search_rank says how it is built); 0.0 for the newest-first list.
    rank: float
    section: str | None = None


def _recent_statements() -> dict[bool, DriverRead]:
    recent = {}
    for include_archived in (False, True):
        conditions = [notes.c.workspace == bindparam("workspace")]
        if not include_archived:
            conditions.append(notes.c.archived.is_(False))
        recent[include_archived] = DriverRead(
            select(*COLUMNS)
            .where(and_(*conditions))
            .order_by(*NEWEST_FIRST)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
    return recent


_RECENT = _recent_statements()


class SearchStore(Protocol):
    """Search over one workspace's notes: ranked for a query, newest first without one."""

    def search(
        self,
        conn: Connection,
        workspace: str,
        query: str | None,
        *,
        include_archived: bool,
        limit: int,
        offset: int,
        tags: Sequence[str] = (),
    ) -> list[SearchHit]: ...

    def records(self, conn: Connection, workspace: str, seqs: list[int]) -> dict[int, NoteRecord]:
        """The notes of these seqs that are in the workspace, by seq."""
        ...


class _NewestFirst(CoreRun):
    """The search without a query (every backend): most recently updated first."""

    _record = staticmethod(NoteRecord.from_row)

    @staticmethod
    def records(conn: Connection, workspace: str, seqs: list[int]) -> dict[int, NoteRecord]:
        """The notes of these seqs that are in the workspace, by seq."""
        return notes_by_seq(conn, workspace, seqs)

    def _recent(
        self, conn: Connection, params: dict[str, Any], include_archived: bool
    ) -> list[SearchHit]:
        rows = self._all(_RECENT[include_archived], conn, params)
        return [SearchHit(self._record(r), *_first_passage(r[4])) for r in rows]

    @staticmethod
    def _tagged_recent(
        conn: Connection, params: dict[str, Any], include_archived: bool, tags: Sequence[str]
    ) -> list[SearchHit]:
        """Most recent first among the notes carrying every tag (Core, any backend)."""
        conditions = _scope(params["workspace"], include_archived, tags)
        rows = conn.execute(
            select(*COLUMNS)
            .where(*conditions)
            .order_by(*NEWEST_FIRST)
            .limit(params["limit"])
            .offset(params["offset"])
        )
        return [SearchHit(NoteRecord.from_row(r), *_first_passage(r[4])) for r in rows]


def _scope(workspace: str, include_archived: bool, tags: Sequence[str]) -> list[Any]:
    """The WHERE of a search: the workspace, live notes unless archived ones are wanted, and
    every tag asked for."""
    conditions: list[Any] = [notes.c.workspace == workspace]
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    return conditions + having_all(workspace, tags)


def tagged_seqs(
    conn: Connection, workspace: str, include_archived: bool, tags: Sequence[str]
) -> set[int]:
    """The seqs of the scope's notes carrying every tag: ranking stays over the whole scope,
    the tag filter keeps only these before a page is cut, so pages agree."""
    conditions = _scope(workspace, include_archived, tags)
    return {int(seq) for (seq,) in conn.execute(select(notes.c.seq).where(*conditions))}


def _first_passage(body: str) -> tuple[str, float, str | None]:
    text, section = snippet(body, None)
    return text, 0.0, section


class RankedSearch(_NewestFirst):
    """Candidates from the backend's indexes, ranked in `search_rank`: the shared part."""

    def search(
        self,
        conn: Connection,
        workspace: str,
        query: str | None,
        *,
        include_archived: bool,
        limit: int,
        offset: int,
        tags: Sequence[str] = (),
    ) -> list[SearchHit]:
        parsed = parse(query) if query else None
        if query and parsed is None:
            return []
        if parsed is None:
            params = {"workspace": workspace, "limit": limit, "offset": offset}
            if tags:
                return self._tagged_recent(conn, params, include_archived, tags)
            return self._recent(conn, params, include_archived)
        carrying = tagged_seqs(conn, workspace, include_archived, tags) if tags else None
        ranked = self.ranked(
            conn,
            workspace,
            parsed,
            include_archived=include_archived,
            keep=offset + limit,
            allowed=carrying,
        )
        page = ranked[offset : offset + limit]
        records = self.records(conn, workspace, [r.seq for r in page])
        hits = []
        for seq, score in page:
            record = records[seq]
            text_, section = snippet(record.body, parsed)
            hits.append(SearchHit(record, text_, score, section))
        return hits

    def ranked(
        self,
        conn: Connection,
        workspace: str,
        query: Query,
        *,
        include_archived: bool,
        keep: int | None = None,
        allowed: set[int] | None = None,
    ) -> list[Ranked]:
        """The matches of the scope, best first: every one, or the first `keep` (the same as
        the first `keep` of every one); with `allowed`, only those seqs, ranked in the scope."""
        groups = self._groups(conn, workspace, query, include_archived)
        total = self._total(conn, workspace, include_archived)
        return rank(query, groups, total, keep=keep, allowed=allowed)

    def _groups(
        self, conn: Connection, workspace: str, query: Query, include_archived: bool
    ) -> list[Group]:
        raise NotImplementedError

    @staticmethod
    def _total(conn: Connection, workspace: str, include_archived: bool) -> int:
        conditions = [notes.c.workspace == workspace]
        if not include_archived:
            conditions.append(notes.c.archived.is_(False))
        count = conn.execute(select(func.count()).select_from(notes).where(*conditions))
        return int(count.scalar_one())


def notes_by_seq(conn: Connection, workspace: str, seqs: list[int]) -> dict[int, NoteRecord]:
    """The notes of these seqs that are in the workspace, by seq. The workspace is checked on
    the rows read, not in the WHERE: with it there, SQLite plans the read from the workspace
    index and walks every note of the workspace (11 ms for 20 notes at 100,000, against 0.2
    by primary key)."""
    if not seqs:
        return {}
    rows = conn.execute(select(*COLUMNS, notes.c.seq).where(notes.c.seq.in_(seqs))).all()
    return {r[10]: NoteRecord.from_row(r) for r in rows if r[1] == workspace}


def _fts_word(word: str, title: bool = False) -> str:
    # Terms hold letters, marks and digits only (search_terms.words): no quote to escape.
    return ("{title} : " if title else "") + f'"{word}"*'


def _fts_sub(sub: str, title: bool = False) -> str:
    return ("{title} : " if title else "") + f'"{sub}"'


def _flag(condition: str, bit: int) -> str:
    return f"CASE WHEN {condition} THEN {bit} ELSE 0 END"


# The scope's rowid range in both FTS5 tables (models.SCOPE_SHIFT): live notes only, or live
# and archived ones. A workspace without a scope key has no notes, so no range and no rows.
_SCOPE = (
    f"scope(key, lo, hi) AS (SELECT key, key * {SCOPE_SHIFT}, key * {SCOPE_SHIFT} + :span - 1"
    f" FROM {SCOPE_TABLE} WHERE workspace = :workspace)"
)
_IN_SCOPE = "rowid BETWEEN (SELECT lo FROM scope) AND (SELECT hi FROM scope)"


def sqlite_candidates(query: Query, include_archived: bool) -> tuple[str, dict[str, Any]]:
    """The SQLite candidate statement for this query, SQL text and its values (`:workspace`
    is the caller's): one row per `search_rank.Group` (mask, count, the seqs joined by
    commas).

    One arm per flag of the mask (each term held, each term in the title, the phrase), each
    arm the notes of the scope that have it: an FTS5 match limited to the scope's rowid range,
    so FTS5 reads only that part of each posting list and no match is ever joined to `notes`.
    The arms are merged in rowid order (UNION ALL), summed by note into its mask, and the
    notes without a content term dropped; then grouped by mask. Terms of one or two
    characters are looked for in the scope's own notes (`instr`), their rows given the same
    FTS5 rowid."""
    params: dict[str, Any] = {"span": SCOPE_SHIFT if include_archived else ARCHIVED_SHIFT}
    held_bits, title_bits, phrase_bit = mask_bits(len(query.terms))
    arms: list[str] = []

    def fts_arm(table: str, name: str, match: str, bit: int) -> None:
        params[name] = match
        arms.append(
            f"SELECT rowid AS k, {bit} AS bit FROM {table} WHERE {table} MATCH :{name}"
            f" AND {_IN_SCOPE}"
        )

    live = "" if include_archived else " AND n.archived = 0"
    for i, term in enumerate(query.terms):
        if not term.substring:
            fts_arm(FTS_TABLE, f"h{i}", _fts_word(term.text), held_bits[i])
            fts_arm(FTS_TABLE, f"t{i}", _fts_word(term.text, True), title_bits[i])
        elif len(term.text) >= 3:
            fts_arm(TRIGRAM_TABLE, f"h{i}", _fts_sub(term.text), held_bits[i])
            fts_arm(TRIGRAM_TABLE, f"t{i}", _fts_sub(term.text, True), title_bits[i])
        else:
            params[f"s{i}"] = term.text
            key = f"(SELECT key FROM scope) * {SCOPE_SHIFT} + n.archived * {ARCHIVED_SHIFT} + n.seq"
            in_title = f"instr(n.title, :s{i}) > 0"
            # One scan for both flags: the arm's bit is the held bit plus the title bit.
            arms.append(
                f"SELECT {key} AS k, {held_bits[i]} + {_flag(in_title, title_bits[i])} AS bit"
                f" FROM notes AS n WHERE n.workspace = :workspace{live}"
                f" AND ({in_title} OR instr(n.body, :s{i}) > 0)"
            )
    if query.phrase is not None:
        fts_arm(FTS_TABLE, "phrase", '"' + " ".join(query.phrase) + '"*', phrase_bit)
    content = sum(held_bits[i] for i in query.content)
    # ORDER BY k: SQLite merges the arms (each already in rowid order) instead of sorting them.
    sql = (
        f"WITH {_SCOPE} "
        f"SELECT mask, count(*), group_concat(k & {SEQ_MASK}) FROM ("
        f"SELECT k, sum(bit) AS mask FROM ({' UNION ALL '.join(arms)} ORDER BY k) "
        f"GROUP BY k HAVING mask & {content}"
        ") GROUP BY mask"
    )
    return sql, params


def _comma_seqs(joined: str) -> Callable[[], list[int]]:
    return lambda: [int(seq) for seq in joined.split(",")]


# What changes when the database may have: another connection's commit (data_version) or a
# change made on this one (total_changes), read inside the search's own read transaction.
_STAMP = "SELECT (SELECT data_version FROM pragma_data_version), total_changes()"
_TOTALS = "notes_server.search.totals"
_TOTALS_KEPT = 64


class Fts5Search(RankedSearch):
    """SQLite: the FTS5 word index and the FTS5 trigram index (migration 0010)."""

    @staticmethod
    def _total(conn: Connection, workspace: str, include_archived: bool) -> int:
        """The scope's size, counted again only when the database may have changed since this
        connection last counted it: the count reads every row of the workspace (`archived` is
        in no index), several times the rest of a search at 10,000 notes."""
        stamp = tuple(conn.exec_driver_sql(_STAMP).one())
        totals: dict[tuple[str, bool], tuple[tuple[Any, ...], int]]
        totals = conn.info.setdefault(_TOTALS, {})
        known = totals.get((workspace, include_archived))
        if known is not None and known[0] == stamp:
            return known[1]
        total = RankedSearch._total(conn, workspace, include_archived)
        if len(totals) >= _TOTALS_KEPT:
            totals.clear()
        totals[(workspace, include_archived)] = (stamp, total)
        return total

    def _groups(
        self, conn: Connection, workspace: str, query: Query, include_archived: bool
    ) -> list[Group]:
        sql, params = sqlite_candidates(query, include_archived)
        rows = conn.exec_driver_sql(sql, {**params, "workspace": workspace}).all()
        return [Group(int(mask), int(count), _comma_seqs(seqs)) for mask, count, seqs in rows]


_PAGE_COLUMNS = ", ".join(c.name for c in COLUMNS)


class SqliteSearch(DriverRun, Fts5Search):
    """SQLite on the pysqlite driver: the newest-first list and the page's notes straight on
    the driver (through Core, reading the 20 notes of a page cost twice the ranking)."""

    _record = staticmethod(NoteRecord.from_driver_row)

    @staticmethod
    def records(conn: Connection, workspace: str, seqs: list[int]) -> dict[int, NoteRecord]:
        if not seqs:
            return {}
        # By primary key, the workspace checked on the rows read (as `notes_by_seq` says why).
        sql = f"SELECT {_PAGE_COLUMNS}, seq FROM notes WHERE seq IN ({', '.join('?' * len(seqs))})"
        rows = driver_connection(conn).execute(sql, seqs).fetchall()
        return {r[10]: NoteRecord.from_driver_row(r) for r in rows if r[1] == workspace}


def _listed(seqs: list[int]) -> Callable[[], list[int]]:
    return lambda: list(seqs)


class TsvectorSearch(RankedSearch):
    """PostgreSQL: the tsvector column (0008) and the pg_trgm indexes (0010); `search_pg`
    builds the statement."""

    def _groups(
        self, conn: Connection, workspace: str, query: Query, include_archived: bool
    ) -> list[Group]:
        statement, params = candidate_statement(query, include_archived)
        rows = conn.execute(statement, {**params, "workspace": workspace}).all()
        return [Group(int(mask), int(count), _listed(seqs)) for mask, count, seqs in rows]


class LikeSearch(_NewestFirst):
    """Portable fallback for databases without an FTS index here: every word must appear in
    the title or the body; newest first, plain snippets."""

    def search(
        self,
        conn: Connection,
        workspace: str,
        query: str | None,
        *,
        include_archived: bool,
        limit: int,
        offset: int,
        tags: Sequence[str] = (),
    ) -> list[SearchHit]:
        parsed = parse(query) if query else None
        if query and parsed is None:
            return []
        params: dict[str, Any] = {"workspace": workspace, "limit": limit, "offset": offset}
        if parsed is None:
            if tags:
                return self._tagged_recent(conn, params, include_archived, tags)
            return self._recent(conn, params, include_archived)
        conditions = _scope(workspace, include_archived, tags)
        for term in parsed.terms:
            pattern = f"%{term.text.lower()}%"
            conditions.append(
                or_(func.lower(notes.c.title).like(pattern), func.lower(notes.c.body).like(pattern))
            )
        rows = conn.execute(
            select(*COLUMNS)
            .where(and_(*conditions))
            .order_by(*NEWEST_FIRST)
            .limit(limit)
            .offset(offset)
        )
        hits = []
        for r in rows:
            text_, section = snippet(r[4], parsed)
            hits.append(SearchHit(NoteRecord.from_row(r), text_, 0.0, section))
        return hits


SQLITE: SearchStore = SqliteSearch()
SQLITE_CORE: SearchStore = Fts5Search()
TSVECTOR: SearchStore = TsvectorSearch()
PORTABLE: SearchStore = LikeSearch()


def store(conn: Connection) -> SearchStore:
    """The search implementation for this connection: FTS5 on SQLite (on the driver unless the
    engine is Core-only), tsvector on PostgreSQL, the LIKE fallback elsewhere."""
    if uses_driver(conn):
        return SQLITE
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return SQLITE_CORE
    if dialect == "postgresql":
        return TSVECTOR
    return PORTABLE


def search(
    conn: Connection,
    workspace: str,
    query: str | None,
    *,
    include_archived: bool,
    limit: int,
    offset: int,
    tags: Sequence[str] = (),
) -> list[SearchHit]:
    """Ranked full-text search or, without a query, most recently updated first; with
    ``tags``, only notes carrying every one of them."""
    return store(conn).search(
        conn,
        workspace,
        query,
        include_archived=include_archived,
        limit=limit,
        offset=offset,
        tags=tags,
    )
