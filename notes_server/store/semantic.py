"""The semantic index: passages and their vectors in the database, the outbox, the indexer's
steps, and the semantic ranking of a scope.

Indexing is three steps so that no write waits for the model: `claim` takes a batch of outbox
rows (on PostgreSQL `FOR UPDATE SKIP LOCKED`, so instances on one database never take the same
rows; a claim expires, so a crashed indexer's rows are taken again) and reads the notes;
the caller embeds outside any transaction; `store` writes, in one write transaction, the
passages of each note that is still at the version that was embedded (on PostgreSQL the note
row is locked `FOR SHARE SKIP LOCKED`: a concurrent delete or update waits for the indexer or,
if it came first, the note keeps its claim for a later round; the indexer never waits for a
writer, so it cannot close a deadlock with a write of many notes), and deletes
its outbox row only if no change came since the claim. A deleted note's passages go with it
(foreign key, and a trigger on SQLite).

Ranking (`semantic_ranked`): the scope's passage vectors, kept in memory per workspace
(store.vector_cache) and scored by cosine in numpy; a note scores its best passage; the best
DEPTH notes that the notes table confirms are in scope now (workspace, archived) are the list.
Brute force over the scope, on both backends: what this machine's PostgreSQL (no pgvector) and
CI can run; at 300k passages the product is a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, delete, func, insert, select, text, update

from notes_server.store.engine import DriverRead, read_all
from notes_server.store.models import notes_table as notes
from notes_server.store.models import outbox_table as outbox
from notes_server.store.models import passages_table as passages
from notes_server.store.models import search_state_table as state
from notes_server.store.search_rank import passages as split_passages
from notes_server.store.vector_cache import ScopeVectors
from notes_server.store.vector_cache import scope as cached_scope

CLAIM_SECONDS = 120
# Semantic neighbours below this cosine are not hits (unrelated notes are near 0).
MIN_SIMILARITY = 0.35
MAX_PASSAGES = 64
# The semantic list fused with the keyword list is its best DEPTH notes, the depth at which the
# retrieval eval measured the fusion (scripts/bench_lib/retrieval.py LIST_DEPTH): below it a
# neighbour adds under 1/(RRF_K + DEPTH) to a fused score, and no query sorts a whole workspace.
DEPTH = 200


class Work(NamedTuple):
    seq: int
    generation: int
    version: int | None  # None: the note is gone
    title: str
    texts: list[tuple[str | None, str]]  # (section, text) per passage

    def inputs(self) -> list[str]:
        """What the model embeds per passage: the title and section before the text, so a
        passage keeps its note's subject."""
        return [
            f"{self.title}. {section + '. ' if section else ''}{body}"
            for section, body in self.texts
        ]


def note_passages(title: str, body: str) -> list[tuple[str | None, str]]:
    """A note's passages (by heading and paragraph, bounded, at most MAX_PASSAGES)."""
    parts = split_passages(body, max_chars=800)[:MAX_PASSAGES]
    if not parts:
        return [(None, title)]
    return [(p.section, p.text) for p in parts]


def _free(now: datetime) -> Any:
    return (outbox.c.claimed_until.is_(None)) | (outbox.c.claimed_until < now)


def _free_rows(now: datetime, workspace: str | None) -> Any:
    """The outbox rows free to claim (of one workspace's notes, when given)."""
    rows = select(outbox.c.note_seq).where(_free(now))
    if workspace is None:
        return rows
    return rows.join_from(outbox, notes, notes.c.seq == outbox.c.note_seq).where(
        notes.c.workspace == workspace
    )


def claimable(conn: Connection, now: datetime, workspace: str | None = None) -> bool:
    """Whether any outbox row is free to claim: a read, so that an indexer woken by a write
    that queued nothing takes no write lock."""
    found = conn.execute(_free_rows(now, workspace).limit(1)).first()
    return found is not None


def pending(conn: Connection, workspace: str) -> int:
    """How many of the workspace's notes wait in the outbox (claimed or not)."""
    waiting = (
        select(func.count())
        .select_from(outbox.join(notes, notes.c.seq == outbox.c.note_seq))
        .where(notes.c.workspace == workspace)
    )
    return int(conn.execute(waiting).scalar_one())


def claim(conn: Connection, now: datetime, batch: int, workspace: str | None = None) -> list[Work]:
    """Claim up to `batch` outbox rows (free, or whose claim expired; of one workspace's notes,
    when given) and read their notes."""
    pick = _free_rows(now, workspace).order_by(outbox.c.note_seq).limit(batch)
    if conn.dialect.name == "postgresql":
        pick = pick.with_for_update(skip_locked=True, of=outbox)  # not the joined notes
    seqs = [r[0] for r in conn.execute(pick)]
    if not seqs:
        return []
    conn.execute(
        update(outbox)
        .where(outbox.c.note_seq.in_(seqs))
        .values(claimed_until=now + timedelta(seconds=CLAIM_SECONDS))
    )
    rows = conn.execute(
        select(outbox.c.note_seq, outbox.c.generation, notes.c.version, notes.c.title, notes.c.body)
        .select_from(outbox.outerjoin(notes, notes.c.seq == outbox.c.note_seq))
        .where(outbox.c.note_seq.in_(seqs))
    ).all()
    return [
        Work(r[0], r[1], r[2], r[3] or "", note_passages(r[3], r[4]) if r[2] is not None else [])
        for r in rows
    ]


def _exists(conn: Connection, seq: int) -> bool:
    return conn.execute(select(notes.c.seq).where(notes.c.seq == seq)).first() is not None


def store(
    conn: Connection, model: str, work: Sequence[Work], vectors: Sequence[Any]
) -> tuple[int, int]:
    """Write the embedded passages of each still-current note; (notes written, passages).
    The first note written bumps the index generation and every row written carries it
    (store.vector_cache reads the rows above the generation it holds). On PostgreSQL the bump
    locks the state row until commit, so generations commit in order."""
    written = count = 0
    generation: int | None = None
    server = conn.dialect.name == "postgresql"
    for item, vecs in zip(work, vectors, strict=True):
        current = select(notes.c.version).where(notes.c.seq == item.seq)
        if server:
            # Never wait for a writer's row lock: a write of many notes takes them in its own
            # order, and waiting here while holding the locks of notes already stored is a
            # deadlock with it. A note being written keeps its claim: the write's trigger frees
            # it when the text changed, else the claim expires (CLAIM_SECONDS).
            current = current.with_for_update(read=True, skip_locked=True)
        version = conn.execute(current).scalar_one_or_none()
        done = delete(outbox).where(
            outbox.c.note_seq == item.seq, outbox.c.generation == item.generation
        )
        if version is None and server and _exists(conn, item.seq):
            continue  # locked by a writer right now (above)
        if version is None:
            conn.execute(delete(outbox).where(outbox.c.note_seq == item.seq))
            continue
        if version != item.version:
            continue  # changed since the claim: the trigger bumped the generation; next round
        if generation is None:
            generation = _next_generation(conn)
        conn.execute(delete(passages).where(passages.c.note_seq == item.seq))
        if item.texts:
            conn.execute(
                insert(passages),
                [
                    {
                        "note_seq": item.seq,
                        "ordinal": i,
                        "section": section[:200] if section else None,
                        "text": body,
                        "model": model,
                        "vector": vec.astype("<f4").tobytes(),
                        "generation": generation,
                    }
                    for i, ((section, body), vec) in enumerate(zip(item.texts, vecs, strict=True))
                ],
            )
        if conn.execute(done).rowcount:
            written += 1
            count += len(item.texts)
        else:  # a change came after the claim: release it for the next round
            conn.execute(
                update(outbox).where(outbox.c.note_seq == item.seq).values(claimed_until=None)
            )
    return written, count


def _next_generation(conn: Connection) -> int:
    bumped = (
        update(state)
        .where(state.c.id == 1)
        .values(generation=state.c.generation + 1)
        .returning(state.c.generation)
    )
    return int(conn.execute(bumped).scalar_one())


_REQUEUE = (
    "INSERT INTO search_outbox (note_seq, generation) SELECT seq, 1 FROM notes WHERE {where} "
    "ON CONFLICT (note_seq) DO UPDATE SET "
    "generation = search_outbox.generation + 1, claimed_until = NULL"
)


def enqueue(conn: Connection, workspace: str | None = None) -> int:
    """Queue notes for (re)embedding: all, or one workspace's. Returns how many."""
    if workspace is None:
        result = conn.execute(text(_REQUEUE.format(where="true")))
    else:
        result = conn.execute(text(_REQUEUE.format(where="workspace = :w")), {"w": workspace})
    return int(result.rowcount)


def enqueue_stale(conn: Connection, model: str) -> int:
    """Queue the notes whose passages another model embedded (a model change re-embeds)."""
    where = "seq IN (SELECT note_seq FROM search_passages WHERE model <> :m)"
    return int(conn.execute(text(_REQUEUE.format(where=where)), {"m": model}).rowcount)


class Status(NamedTuple):
    pending: int
    embedded_notes: int
    passages: int
    models: dict[str, int]


def status(conn: Connection) -> Status:
    pending = conn.execute(select(func.count()).select_from(outbox)).scalar_one()
    done = conn.execute(select(func.count(func.distinct(passages.c.note_seq)))).scalar_one()
    models = {
        r[0]: r[1]
        for r in conn.execute(select(passages.c.model, func.count()).group_by(passages.c.model))
    }
    return Status(int(pending), int(done), sum(models.values()), models)


class SemanticHit(NamedTuple):
    seq: int
    similarity: float
    passage: int  # the id of the note's best passage (its text: passage_texts)


def _scope_rows(
    conn: Connection, workspace: str, model: str, include_archived: bool
) -> Sequence[Any]:
    conditions = [notes.c.workspace == workspace, passages.c.model == model]
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    return conn.execute(
        select(passages.c.note_seq, passages.c.vector)
        .join_from(passages, notes, notes.c.seq == passages.c.note_seq)
        .where(*conditions)
        .order_by(passages.c.note_seq, passages.c.ordinal)
    ).all()


def _matrix(rows: Sequence[Any]) -> Any:
    import numpy as np

    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype="<f4").reshape(len(rows), -1)


def scope_matrix(
    conn: Connection, workspace: str, model: str, *, include_archived: bool
) -> tuple[list[int], Any]:
    """The scope's passages as (note seq per row, float32 matrix of unit rows)."""
    rows = _scope_rows(conn, workspace, model, include_archived)
    return [int(r[0]) for r in rows], _matrix(rows)


def best_per_note(seqs: Sequence[int], sims: Any) -> list[tuple[int, float, int]]:
    """(seq, similarity, row) of each note's best passage, best first (ties: seq; within a
    note, the first passage), with no threshold: numpy throughout, no per-row Python."""
    import numpy as np

    if not len(seqs):
        return []
    seq_arr = np.asarray(seqs, dtype=np.int64)
    sims = np.round(np.asarray(sims, dtype=np.float64), 6)
    rows = np.arange(len(seq_arr))
    order = np.lexsort((rows, -sims, seq_arr))  # by note, best passage first
    first = np.ones(len(order), dtype=bool)
    first[1:] = seq_arr[order][1:] != seq_arr[order][:-1]
    best = order[first]
    best = best[np.lexsort((seq_arr[best], -sims[best]))]
    return [(int(seq_arr[i]), float(sims[i]), int(i)) for i in best]


def _ordered(note_seqs: Any, best: Any, among: Any) -> Any:
    """The indexes `among` by best similarity, then seq."""
    import numpy as np

    return among[np.lexsort((note_seqs[among], -best[among]))]


def _candidates(note_seqs: Any, best: Any, want: int) -> Iterator[Any]:
    """Note indexes at or above MIN_SIMILARITY, best first (ties: seq), in batches: first the
    top `want` (and every note tied with the last of them), then all the rest, so the usual
    query sorts a few thousand notes instead of the whole workspace."""
    import numpy as np

    above = np.flatnonzero(best >= MIN_SIMILARITY)
    if len(above) > want:
        cut = np.partition(best[above], len(above) - want)[len(above) - want]
        head = above[best[above] >= cut]
        yield _ordered(note_seqs, best, head)
        yield _ordered(note_seqs, best, above[best[above] < cut])
    else:
        yield _ordered(note_seqs, best, above)


def semantic_ranked(
    conn: Connection,
    workspace: str,
    vector: Any,
    model: str,
    *,
    include_archived: bool,
    depth: int = DEPTH,
    allowed: set[int] | None = None,
) -> list[SemanticHit]:
    """The scope's notes by their best passage's cosine to `vector`, best first (ties: seq;
    within a note, its first best passage), those at or above MIN_SIMILARITY, at most `depth`;
    with `allowed`, only those seqs.
    Vectors come from the process's cache (store.vector_cache); every candidate is checked
    against the notes table here, in the caller's transaction, before it is ranked."""
    import numpy as np

    scope = cached_scope(conn, workspace, model)
    if not len(scope.ids):
        return []
    sims = scope.matrix @ np.asarray(vector, dtype=np.float32)
    # Rounded after the maximum (rounding keeps order): one pass over the passages.
    best = np.round(np.maximum.reduceat(sims, scope.starts).astype(np.float64), 6)
    hits: list[SemanticHit] = []
    for batch in _candidates(scope.note_seqs, best, depth):
        for chunk in range(0, len(batch), depth):
            part = batch[chunk : chunk + depth]
            in_scope = _in_scope(
                conn, workspace, [int(scope.note_seqs[i]) for i in part], include_archived
            )
            rows = _best_rows(scope, sims, part)
            for i, row in zip(part.tolist(), rows.tolist(), strict=True):
                seq = int(scope.note_seqs[i])
                if seq not in in_scope or (allowed is not None and seq not in allowed):
                    continue
                hits.append(SemanticHit(seq, float(best[i]), int(scope.ids[row])))
                if len(hits) == depth:
                    return hits
    return hits


def moved_toward(
    conn: Connection,
    workspace: str,
    vector: Any,
    model: str,
    seqs: Sequence[int],
    weight: float,
) -> Any:
    """The query vector moved toward the best passages of these notes (pseudo-relevance
    feedback, Rocchio's form: the query plus `weight` x the mean of those passages, back to unit
    length), or the vector as it was when none of them has passages. The seqs must come from a
    ranking of the caller's scope: only the workspace's kept rows are looked at."""
    import numpy as np

    query = np.asarray(vector, dtype=np.float32)
    if not seqs:
        return query
    scope = cached_scope(conn, workspace, model)
    found = scope.notes_of(seqs)
    if not len(found):
        return query
    best = []
    for note in found.tolist():
        start, end = scope.rows_of(note)
        block = scope.matrix[start:end]
        best.append(block[int(np.argmax(block @ query))] if end - start > 1 else block[0])
    moved = query + np.float32(weight) * np.mean(best, axis=0, dtype=np.float32)
    norm = float(np.linalg.norm(moved))
    return moved / np.float32(norm) if norm > 0 else query


def _best_rows(scope: ScopeVectors, sims: Any, notes_at: Any) -> Any:
    """Each note's first passage row at its best (rounded) similarity, for the notes at these
    indexes: a note of one passage (most) is its start, without a per-note argmax."""
    import numpy as np

    starts = scope.starts[notes_at]
    ends = np.append(scope.starts, len(scope.ids))[notes_at + 1]
    rows = starts.copy()
    for k in np.flatnonzero(ends - starts > 1).tolist():
        span = sims[starts[k] : ends[k]].astype(np.float64)
        rows[k] = starts[k] + int(np.argmax(np.round(span, 6)))
    return rows


_SCOPE_OF = DriverRead(
    select(notes.c.seq, notes.c.workspace, notes.c.archived).where(
        notes.c.seq.in_(bindparam("seqs", expanding=True))
    )
)
_PASSAGE_TEXTS = DriverRead(
    select(passages.c.id, passages.c.section, passages.c.text).where(
        passages.c.id.in_(bindparam("ids", expanding=True))
    )
)


def _in_scope(
    conn: Connection, workspace: str, seqs: list[int], include_archived: bool
) -> set[int]:
    """Which of these notes are in the workspace now (and not archived, unless asked). Read by
    primary key and filtered here: with the workspace in the WHERE clause SQLite's planner walks
    the workspace's index instead of looking the notes up (4 ms against 0.4 ms at 10k notes)."""
    if not seqs:
        return set()
    rows = read_all(_SCOPE_OF, conn, {"seqs": seqs})
    return {int(r[0]) for r in rows if r[1] == workspace and (include_archived or not r[2])}


def passage_texts(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[str | None, str]]:
    """(section, text) of these passages."""
    if not ids:
        return {}
    rows = read_all(_PASSAGE_TEXTS, conn, {"ids": list(ids)})
    return {int(r[0]): (r[1], str(r[2])) for r in rows}
