"""Each workspace's passage vectors, kept in memory between searches.

Handing every vector of a workspace over from the database on each query is what made semantic
ranking slow (about 0.2 s at 10k notes, growing with the workspace); the matrix product over the
same vectors takes milliseconds. So a process keeps, per engine and (workspace, model), the
matrix with the note and passage id of each row, labelled with what the database said when it
was read:

- the change log's latest sequence (migration 0016: every note mutation, from any process);
- the semantic index's generation (migration 0019: every indexer write of passages).

When either moved, only what changed is read again, not the workspace (a whole read is 0.6-0.8 s
at 100k notes): the notes whose passages were written above the generation held (each row
carries its generation, migration 0021), and the notes the change log names in this workspace
since the sequence held (a note moved in keeps its old passages). Their rows are replaced.
A deleted note's rows stay until the next whole read, harmless: scope does not rest on this
cache, `semantic.semantic_ranked` checks its candidates against the notes table (workspace,
archived) in the same transaction, so a row kept for a note that has since moved out, been
archived or been deleted ranks nothing. A whole read happens instead when the log no longer
holds the sequence, when more than REFRESH_MAX notes changed, or once the changes since the
last whole read pass a quarter of the workspace (which bounds the rows of deleted notes kept).

Both labels are read in the caller's read transaction before the rows, so a cache is never
labelled newer than what it holds. On PostgreSQL a lower sequence can commit after a higher one
was read (store.changes): the token also counts the log's rows of the last LOG_SLACK sequences
(so such a commit changes it), and the log is read again LOG_SLACK sequences below the one
held.

Bounded: MAX_BYTES of vectors in all, least recently used workspaces dropped first; a workspace
larger than that is read for its query and not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, Engine, bindparam, func, select

from notes_server.store.models import changes_table as changes
from notes_server.store.models import notes_table as notes
from notes_server.store.models import passages_table as passages
from notes_server.store.models import search_state_table as state
from notes_server.store.per_object import OnePer

if TYPE_CHECKING:
    import numpy as np

# 192 MiB of float32 rows: ~750k passages of the 64-dimension model, twice what the issue's
# 100k-note workspace holds.
MAX_BYTES = 192 * 1024 * 1024
# More changed notes than this: one whole read costs less than the lookups.
REFRESH_MAX = 2_000
REFRESH_ROWS = 20_000  # passages written since: the same, counted in rows
# PostgreSQL only: how far below the sequence held the log is read again (a late commit).
LOG_SLACK = 256
# A whole read once the changes since the last one pass a quarter of the notes and this.
STALE_SLACK = 100


class Token(NamedTuple):
    changes: int  # the change log's latest sequence
    generation: int  # the semantic index's generation
    # PostgreSQL: how many log rows hold the last LOG_SLACK sequences, so that a lower
    # sequence committing after a higher one was read still changes the token (SQLite: 0).
    recent: int = 0


@dataclass(frozen=True)
class ScopeVectors:
    """A workspace's passages, each note's rows together in ordinal order: `matrix` row i is
    passage `ids[i]`; note `note_seqs[j]` owns the rows from `starts[j]` to the next start."""

    token: Token
    ids: np.ndarray
    matrix: np.ndarray
    note_seqs: np.ndarray
    starts: np.ndarray
    # The change log's sequence at the last whole read: how much may have gone stale since.
    read_at: int = 0

    def rows_of(self, note: int) -> tuple[int, int]:
        """The rows of the note at index `note` of `note_seqs`."""
        end = int(self.starts[note + 1]) if note + 1 < len(self.starts) else len(self.ids)
        return int(self.starts[note]), end

    def notes_of(self, seqs: Sequence[int]) -> np.ndarray:
        """The indexes in `note_seqs` of those of these seqs that the scope holds."""
        import numpy as np

        order, ordered = self._seq_order
        if not len(ordered):
            return np.zeros(0, dtype=np.int64)
        wanted = np.asarray(seqs, dtype=np.int64)
        at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
        found: np.ndarray = order[at[ordered[at] == wanted]]
        return found

    @cached_property
    def _seq_order(self) -> tuple[np.ndarray, np.ndarray]:
        """`note_seqs` sorted, with the permutation that sorts it (a refresh appends the
        changed notes at the end, so the rows are not in seq order)."""
        order = self.note_seqs.argsort(kind="stable")
        return order, self.note_seqs[order]

    @property
    def nbytes(self) -> int:
        arrays = (self.matrix, self.ids, self.note_seqs, self.starts)
        return int(sum(a.nbytes for a in arrays))


def _token(conn: Connection) -> Token:
    latest = select(func.max(changes.c.seq)).scalar_subquery()
    generation = select(state.c.generation).where(state.c.id == 1).scalar_subquery()
    if conn.dialect.name != "postgresql":
        pair = conn.execute(select(latest, generation)).one()
        return Token(int(pair[0] or 0), int(pair[1] or 0))
    recent = (
        select(func.count())
        .select_from(changes)
        .where(changes.c.seq > func.coalesce(latest, 0) - LOG_SLACK)
        .scalar_subquery()
    )
    row = conn.execute(select(latest, generation, recent)).one()
    return Token(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))


def _scope_rows(
    conn: Connection, workspace: str, model: str, only: Sequence[int] | None = None
) -> Sequence[Any]:
    """(note seq, passage id, vector) of the workspace's passages (or of these notes' only),
    by note and ordinal."""
    query = (
        select(passages.c.note_seq, passages.c.id, passages.c.vector)
        .join_from(passages, notes, notes.c.seq == passages.c.note_seq)
        .where(notes.c.workspace == workspace, passages.c.model == model)
        .order_by(passages.c.note_seq, passages.c.ordinal)
    )
    if only is None:
        return conn.execute(query).all()
    query = query.where(passages.c.note_seq.in_(bindparam("only", expanding=True)))
    return conn.execute(query, {"only": list(only)}).all()


def _arrays(rows: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(note seq per row, passage ids, matrix) of rows from `_scope_rows`."""
    import numpy as np

    seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype="<f4")
    return seqs, ids, matrix.reshape(len(rows), -1) if rows else matrix.reshape(0, 0)


def _grouped(
    token: Token, row_seqs: np.ndarray, ids: np.ndarray, matrix: np.ndarray, read_at: int
) -> ScopeVectors:
    """The scope of rows whose notes' rows are contiguous."""
    import numpy as np

    if not len(ids):
        empty = np.zeros(0, dtype=np.int64)
        return ScopeVectors(token, empty, np.zeros((0, 0), dtype=np.float32), empty, empty, read_at)
    first = np.concatenate(([True], row_seqs[1:] != row_seqs[:-1]))
    starts = np.flatnonzero(first)
    return ScopeVectors(token, ids, matrix, row_seqs[starts], starts, read_at)


def _load(conn: Connection, workspace: str, model: str, token: Token) -> ScopeVectors:
    seqs, ids, matrix = _arrays(_scope_rows(conn, workspace, model))
    return _grouped(token, seqs, ids, matrix, token.changes)


def _changed_notes(conn: Connection, workspace: str, held: Token, token: Token) -> set[int] | None:
    """The notes whose kept rows may be wrong since `held`; None when a whole read is due."""
    changed: set[int] = set()
    if token.generation != held.generation:
        # Rows, not DISTINCT notes: for a DISTINCT SQLite walks the note index of every row.
        rewritten = conn.execute(
            select(passages.c.note_seq)
            .where(passages.c.generation > held.generation)
            .limit(REFRESH_ROWS + 1)
        ).all()
        if len(rewritten) > REFRESH_ROWS:
            return None
        changed.update(int(r[0]) for r in rewritten)
    if (token.changes, token.recent) != (held.changes, held.recent):
        since = held.changes - (LOG_SLACK if conn.dialect.name == "postgresql" else 0)
        oldest = conn.execute(select(func.min(changes.c.seq))).scalar()
        if oldest is None or oldest > held.changes + 1:
            return None  # the log no longer says everything that happened since
        # Any kind but a delete may bring a note in (a move, also one made with an archive).
        logged = conn.execute(
            select(notes.c.seq)
            .join_from(changes, notes, notes.c.id == changes.c.note_id)
            .where(
                changes.c.seq > since,
                changes.c.workspace == workspace,
                changes.c.kind != "deleted",
            )
            .distinct()
            .limit(REFRESH_MAX + 1)
        )
        changed.update(int(r[0]) for r in logged)
    return changed if len(changed) <= REFRESH_MAX else None


def _refresh(
    conn: Connection, kept: ScopeVectors, workspace: str, model: str, token: Token
) -> ScopeVectors | None:
    """`kept` with the rows of the notes changed since its token read again; None when a
    whole read is due instead."""
    import numpy as np

    if token.changes - kept.read_at > len(kept.note_seqs) // 4 + STALE_SLACK:
        return None  # enough may be stale (deleted notes' rows) to read it all again
    changed = _changed_notes(conn, workspace, kept.token, token)
    if changed is None:
        return None
    if not changed:
        return replace(kept, token=token)
    new_seqs, new_ids, new_matrix = _arrays(_scope_rows(conn, workspace, model, sorted(changed)))
    counts = np.diff(np.append(kept.starts, len(kept.ids)))
    row_seqs = np.repeat(kept.note_seqs, counts)
    keep = ~np.isin(row_seqs, np.fromiter(changed, dtype=np.int64, count=len(changed)))
    if not len(kept.ids):
        return _grouped(token, new_seqs, new_ids, new_matrix, kept.read_at)
    # One copy of the kept rows (tens of MB at 100k notes), straight into the new matrix.
    held = int(keep.sum())
    matrix = np.empty((held + len(new_ids), kept.matrix.shape[1]), dtype=kept.matrix.dtype)
    np.compress(keep, kept.matrix, axis=0, out=matrix[:held])
    if len(new_ids):
        matrix[held:] = new_matrix
    parts = (
        np.concatenate((row_seqs[keep], new_seqs)),
        np.concatenate((kept.ids[keep], new_ids)),
        matrix,
    )
    return _grouped(token, *parts, kept.read_at)


def _newer(held: Token, token: Token) -> bool:
    return held.changes >= token.changes and held.generation >= token.generation


class VectorCache:
    """The kept scopes of one engine, least recently used first."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._scopes: OrderedDict[tuple[str, str], ScopeVectors] = OrderedDict()
        self.whole_reads = 0  # how often a workspace was read whole (tests, diagnostics)

    def scope(self, conn: Connection, workspace: str, model: str) -> ScopeVectors:
        token = _token(conn)
        key = (workspace, model)
        with self._lock:
            kept = self._scopes.get(key)
            if kept is not None and kept.token == token:
                self._scopes.move_to_end(key)
                return kept
        fresh = _refresh(conn, kept, workspace, model, token) if kept is not None else None
        if fresh is None:
            fresh = _load(conn, workspace, model, token)
            self.whole_reads += 1
        with self._lock:
            held = self._scopes.get(key)
            if held is not None and held is not kept and _newer(held.token, token):
                return fresh  # another thread kept a newer read meanwhile: it stays
            self._scopes.pop(key, None)
            if fresh.nbytes <= self.max_bytes:
                self._scopes[key] = fresh
                total = sum(s.nbytes for s in self._scopes.values())
                while total > self.max_bytes:
                    _, dropped = self._scopes.popitem(last=False)
                    total -= dropped.nbytes
        return fresh

    def kept(self) -> int:
        """How many scopes are held (for tests of the bound)."""
        with self._lock:
            return len(self._scopes)


_CACHES: OnePer[Engine, VectorCache] = OnePer(lambda _engine: VectorCache())


def for_engine(engine: Engine) -> VectorCache:
    """The cache of this engine's database in this process (gone with the engine)."""
    return _CACHES(engine)


def scope(conn: Connection, workspace: str, model: str) -> ScopeVectors:
    return for_engine(conn.engine).scope(conn, workspace, model)
