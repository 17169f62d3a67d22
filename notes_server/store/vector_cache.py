"""Each workspace's passage vectors, kept in memory between searches.

Handing every vector of a workspace over from the database on each query is what made semantic
ranking slow (about 0.2 s at 10k notes, growing with the workspace); the matrix product over the
same vectors takes milliseconds. So a process keeps, per engine and (workspace, model), the
matrix with the note and passage id of each row, and reads it again only when the database says
that something changed:

- the change log's latest sequence (migration 0016: every note mutation, from any process);
- the semantic index's generation (migration 0019: every indexer write of passages).

Both are read in the caller's read transaction before the rows, so a cache is never labelled
newer than what it holds (on PostgreSQL a commit between the two reads only costs one more read
later). Scope does not rest on this cache: `semantic.semantic_ranked` checks its candidates
against the notes table (workspace, archived) in the same transaction, so a row kept for a note
that has since moved out, been archived or been deleted ranks nothing.

Bounded: MAX_BYTES of vectors in all, least recently used workspaces dropped first; a workspace
larger than that is read for its query and not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, func, select

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


@dataclass(frozen=True)
class ScopeVectors:
    """A workspace's passages in (note, ordinal) order: `matrix` row i is passage `ids[i]`;
    note `note_seqs[j]` owns the rows from `starts[j]` to the next start."""

    token: tuple[int, int]
    ids: np.ndarray
    matrix: np.ndarray
    note_seqs: np.ndarray
    starts: np.ndarray

    def rows_of(self, note: int) -> tuple[int, int]:
        """The rows of the note at index `note` of `note_seqs`."""
        end = int(self.starts[note + 1]) if note + 1 < len(self.starts) else len(self.ids)
        return int(self.starts[note]), end

    @property
    def nbytes(self) -> int:
        arrays = (self.matrix, self.ids, self.note_seqs, self.starts)
        return int(sum(a.nbytes for a in arrays))


def _token(conn: Connection) -> tuple[int, int]:
    latest = select(func.max(changes.c.seq)).scalar_subquery()
    generation = select(state.c.generation).where(state.c.id == 1).scalar_subquery()
    row = conn.execute(select(latest, generation)).one()
    return int(row[0] or 0), int(row[1] or 0)


def _load(conn: Connection, workspace: str, model: str, token: tuple[int, int]) -> ScopeVectors:
    import numpy as np

    rows = conn.execute(
        select(passages.c.note_seq, passages.c.id, passages.c.vector)
        .join_from(passages, notes, notes.c.seq == passages.c.note_seq)
        .where(notes.c.workspace == workspace, passages.c.model == model)
        .order_by(passages.c.note_seq, passages.c.ordinal)
    ).all()
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        matrix = np.zeros((0, 0), dtype=np.float32)
        return ScopeVectors(token, empty, matrix, empty, empty)
    seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype="<f4")
    matrix = matrix.reshape(len(rows), -1)
    first = np.concatenate(([True], seqs[1:] != seqs[:-1]))
    starts = np.flatnonzero(first)
    return ScopeVectors(token, ids, matrix, seqs[starts], starts)


class VectorCache:
    """The kept scopes of one engine, least recently used first."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._scopes: OrderedDict[tuple[str, str], ScopeVectors] = OrderedDict()

    def scope(self, conn: Connection, workspace: str, model: str) -> ScopeVectors:
        token = _token(conn)
        key = (workspace, model)
        with self._lock:
            kept = self._scopes.get(key)
            if kept is not None and kept.token == token:
                self._scopes.move_to_end(key)
                return kept
        fresh = _load(conn, workspace, model, token)
        with self._lock:
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
