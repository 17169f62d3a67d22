"""Ranked full-text search over notes, or most recently updated first.

`SearchStore` is the interface. On SQLite a search ranks inside FTS5 and joins only the best rows
to their notes (`Fts5Search.search` says how the scope filter stays exact), on the driver
(`SqliteSearch`) or through Core (`Fts5Search`, the Core-only mode). PostgreSQL ranks its
tsvector column (`TsvectorSearch`, its SQL in `search_pg`); any other database gets the
portable LIKE fallback (`LikeSearch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    Float,
    String,
    and_,
    bindparam,
    column,
    func,
    literal_column,
    or_,
    select,
    table,
    text,
)

from notes_server.store.engine import CoreRun, DriverRun, FastRead, uses_driver
from notes_server.store.models import FTS_TABLE
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS, NEWEST_FIRST, NoteRecord
from notes_server.store.search_pg import FTS_WORDS, ranked_rows, ts_query
from notes_server.store.tags import having_all

_fts = table(FTS_TABLE, column("rowid"), column(FTS_TABLE))


@dataclass(frozen=True, slots=True)
class SearchHit:
    note: NoteRecord
    snippet: str
    rank: float


_RANK = "bm25(notes_fts, 10.0, 1.0)"
_SNIPPET = "snippet(notes_fts, 1, '**', '**', '…', 12)"


def _search_statements() -> tuple[dict[bool, FastRead], dict[bool, FastRead], dict[bool, FastRead]]:
    """(most recent first, FTS5 top-k, FTS5 full join) statements, keyed by include_archived."""
    recent, top_k, joined = {}, {}, {}
    # Ordered by the label: a second bm25() call in ORDER BY would be scored again for every
    # match.
    rank = literal_column(_RANK, Float).label("score")
    snip = literal_column(_SNIPPET, String)
    for include_archived in (False, True):
        conditions = [notes.c.workspace == bindparam("workspace")]
        if not include_archived:
            conditions.append(notes.c.archived.is_(False))
        recent[include_archived] = FastRead(
            select(*COLUMNS)
            .where(and_(*conditions))
            .order_by(*NEWEST_FIRST)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
        joined[include_archived] = FastRead(
            select(*COLUMNS, snip, rank)
            .join_from(notes, _fts, _fts.c.rowid == notes.c.seq)
            .where(_fts.c.notes_fts.op("MATCH")(bindparam("match")), *conditions)
            .order_by(rank, notes.c.seq)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
        live = "" if include_archived else " AND n.archived = 0"
        top_k[include_archived] = FastRead(
            text(
                # 1. rank inside FTS5 alone and keep the best :k rows (no per-match join);
                # 2. walk the matches again, cheaply, to reach the FTS cursor for snippet(),
                #    which SQLite then computes for the k kept rows only;
                # 3. LEFT JOIN the notes with the scope filter: a filtered-out row comes back
                #    with NULL columns, so the caller knows whether k was enough.
                "WITH top AS ("
                f"SELECT rowid AS seq, {_RANK} AS score FROM notes_fts"
                " WHERE notes_fts MATCH :match ORDER BY score, rowid LIMIT :k) "
                f"SELECT {', '.join('n.' + c.name for c in COLUMNS)},"
                f" CASE WHEN n.seq IS NULL THEN NULL ELSE {_SNIPPET} END, top.score"
                " FROM notes_fts CROSS JOIN top ON top.seq = notes_fts.rowid"
                f" LEFT JOIN notes AS n ON n.seq = top.seq AND n.workspace = :workspace{live}"
                " WHERE notes_fts MATCH :match ORDER BY top.score, top.seq"
            ).columns(*COLUMNS, column("snippet", String), column("score", Float))
        )
    return recent, top_k, joined


_RECENT, _TOP_K, _RANKED = _search_statements()
# Over-fetch for the top-k statement: beyond this many FTS rows, rank with the full join.
_TOP_K_MAX = 2048
# Per DB-API connection (`Connection.info`): scopes whose top matches were mostly someone
# else's, and for how many more searches to go straight to the plain join. The plan only;
# either way the answer is the same.
_CROWDED = "notes_server.search.crowded"
_CROWDED_SKIPS = 32
_CROWDED_MAX = 1024


def fts_query(query: str) -> str | None:
    """Turn free text into a safe FTS5 query: every word as a quoted prefix term, ANDed."""
    words = FTS_WORDS.findall(query)[:16]
    if not words:
        return None
    return " ".join(f'"{w}"*' for w in words)


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


class _NewestFirst(CoreRun):
    """The search without a query (every backend): most recently updated first."""

    _record = staticmethod(NoteRecord.from_row)

    def _recent(
        self, conn: Connection, params: dict[str, Any], include_archived: bool
    ) -> list[SearchHit]:
        rows = self._all(_RECENT[include_archived], conn, params)
        return [SearchHit(self._record(r), _plain_snippet(r[4]), 0.0) for r in rows]

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
        return [SearchHit(NoteRecord.from_row(r), _plain_snippet(r[4]), 0.0) for r in rows]


def _scope(workspace: str, include_archived: bool, tags: Sequence[str]) -> list[Any]:
    """The WHERE of a search: the workspace, live notes unless archived ones are wanted, and
    every tag asked for."""
    conditions: list[Any] = [notes.c.workspace == workspace]
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    return conditions + having_all(workspace, tags)


class Fts5Search(_NewestFirst):
    """SQLite FTS5, ranked by bm25, through Core (the Core-only mode on SQLite)."""

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
        """Ranked hits are ordered by (bm25, seq) whichever statement found them, so pages
        agree. With tags, one Core statement filters by them beside the match."""
        match = fts_query(query) if query else None
        if query and match is None:
            return []
        params: dict[str, Any] = {"workspace": workspace, "limit": limit, "offset": offset}
        if tags:
            if match is None:
                return self._tagged_recent(conn, params, include_archived, tags)
            return self._tagged_ranked(conn, params, match, include_archived, tags)
        if match is None:
            return self._recent(conn, params, include_archived)
        return self._ranked(conn, params, match, include_archived)

    @staticmethod
    def _tagged_ranked(
        conn: Connection,
        params: dict[str, Any],
        match: str,
        include_archived: bool,
        tags: Sequence[str],
    ) -> list[SearchHit]:
        rank = literal_column(_RANK, Float).label("score")
        rows = conn.execute(
            select(*COLUMNS, literal_column(_SNIPPET, String), rank)
            .join_from(notes, _fts, _fts.c.rowid == notes.c.seq)
            .where(
                _fts.c.notes_fts.op("MATCH")(match),
                *_scope(params["workspace"], include_archived, tags),
            )
            .order_by(rank, notes.c.seq)
            .limit(params["limit"])
            .offset(params["offset"])
        )
        return [SearchHit(NoteRecord.from_row(r), r[10] or "", float(r[11])) for r in rows]

    def _ranked(
        self, conn: Connection, params: dict[str, Any], match: str, include_archived: bool
    ) -> list[SearchHit]:
        wanted = params["offset"] + params["limit"]
        offset = params["offset"]
        memo: dict[tuple[str, bool], int] = conn.info.setdefault(_CROWDED, {})
        scope = (params["workspace"], include_archived)
        if memo.get(scope, 0) > 0:  # crowded out recently: rank the scope's own matches at once
            memo[scope] -= 1
            return self._plain_join(conn, params, match, include_archived)
        k = wanted  # snippet() runs for every in-scope row of the k: no spare rows
        for _ in range(2):
            rows = self._all(_TOP_K[include_archived], conn, {**params, "match": match, "k": k})
            kept = [r for r in rows if r[0] is not None]
            # Enough in scope, or FTS had no more matches than k: the top-k answer is exact.
            if len(kept) >= wanted or len(rows) < k:
                return [self._hit(r) for r in kept[offset:wanted]]
            # Crowded out by other workspaces or archived notes: one wider try, sized from the
            # in-scope share just seen, when that share is not tiny.
            if not kept:
                break
            k = 2 * wanted * -(-k // len(kept))
            if k > _TOP_K_MAX:
                break
        # A small scope in a big database: the plain join is cheaper, and stays the plan for
        # the next searches of this scope on this connection (then top-k is tried again).
        if len(memo) >= _CROWDED_MAX:
            memo.clear()
        memo[scope] = _CROWDED_SKIPS
        return self._plain_join(conn, params, match, include_archived)

    def _plain_join(
        self, conn: Connection, params: dict[str, Any], match: str, include_archived: bool
    ) -> list[SearchHit]:
        rows = self._all(_RANKED[include_archived], conn, {**params, "match": match})
        return [self._hit(r) for r in rows]

    def _hit(self, row: Sequence[Any]) -> SearchHit:
        return SearchHit(self._record(row), row[10] or "", float(row[11]))


class SqliteSearch(DriverRun, Fts5Search):
    """SQLite FTS5 on the pysqlite driver: the hot path of notes_search."""

    _record = staticmethod(NoteRecord.from_driver_row)


class TsvectorSearch(_NewestFirst):
    """PostgreSQL: ranked by ts_rank over the GIN-indexed tsvector, ts_headline snippets; the
    scope filter sits beside the match, so every page is exact (`search_pg` has the SQL)."""

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
        match = ts_query(query) if query else None
        if query and match is None:
            return []
        params: dict[str, Any] = {"workspace": workspace, "limit": limit, "offset": offset}
        if match is None:
            if tags:
                return self._tagged_recent(conn, params, include_archived, tags)
            return self._recent(conn, params, include_archived)
        extra = having_all(workspace, tags)
        rows = ranked_rows(conn, {**params, "query": match}, include_archived, extra)
        return [SearchHit(NoteRecord.from_row(r), r[10] or "", float(r[11])) for r in rows]


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
        words = FTS_WORDS.findall(query)[:16] if query else []
        if query and not words:
            return []
        params: dict[str, Any] = {"workspace": workspace, "limit": limit, "offset": offset}
        if not words:
            if tags:
                return self._tagged_recent(conn, params, include_archived, tags)
            return self._recent(conn, params, include_archived)
        conditions = _scope(workspace, include_archived, tags)
        for word in words:
            pattern = f"%{word.lower()}%"
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
        return [SearchHit(NoteRecord.from_row(r), _plain_snippet(r[4]), 0.0) for r in rows]


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


def _plain_snippet(body: str, width: int = 160) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
