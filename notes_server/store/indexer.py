"""The background indexer of semantic search: outbox rows to vectors, never inside a writer's
transaction (`semantic` has the steps). Used by `serve` (a daemon thread) and by
`notes-server index [--watch]` (its own process); several may run on one PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Engine

from notes_server.store import semantic
from notes_server.store.engine import read_tx, retrying, write_signal, write_tx

log = logging.getLogger("notes_server.indexer")
BATCH = 32


class Stop(Protocol):
    """What says to stop between batches (a threading.Event, a task's control)."""

    def is_set(self) -> bool: ...


def run_once(
    engine: Engine, embedder: Any, batch: int = BATCH, workspace: str | None = None
) -> tuple[int, int]:
    """Claim, embed and store one batch (of one workspace's notes, when given): (notes
    claimed, passages written). A read looks first: with nothing to claim, no write
    transaction is taken (nor a write signalled)."""
    with read_tx(engine) as conn:
        if not semantic.claimable(conn, datetime.now(UTC), workspace):
            return 0, 0
    with write_tx(engine) as conn:
        work = semantic.claim(conn, datetime.now(UTC), batch, workspace)
    if not work:
        return 0, 0
    vectors = []
    for item in work:
        vectors.append(embedder.embed(item.inputs()) if item.texts else [])

    def store() -> tuple[int, int]:
        with write_tx(engine) as conn:
            return semantic.store(conn, embedder.model, work, vectors)

    _, passages = retrying(store)
    return len(work), passages


def drain(
    engine: Engine,
    embedder: Any,
    progress: Callable[[int, int], None] | None = None,
    stop: Stop | None = None,
    workspace: str | None = None,
) -> int:
    """Run batches until the outbox has nothing claimable (of the workspace's notes, when
    given) or `stop` is set; returns passages written."""
    total = 0
    while stop is None or not stop.is_set():
        claimed, passages = run_once(engine, embedder, workspace=workspace)
        if not claimed:
            break
        total += passages
        if progress is not None:
            progress(claimed, passages)
    return total


def requeue_stale(engine: Engine, model: str) -> int:
    with write_tx(engine) as conn:
        return semantic.enqueue_stale(conn, model)


# How often a watching indexer looks for writes it was not told about (other processes: an
# `index --watch` beside the server, another HTTP worker or instance). On SQLite the look is
# `PRAGMA data_version` on a connection of its own (a counter read, no table touched), so it
# can be frequent; elsewhere it is a look at the outbox, so it is slow.
SQLITE_POLL_S = 0.5
SERVER_POLL_S = 5.0


class _OtherWrites:
    """Whether another connection may have committed since the last look: on SQLite, whether
    `PRAGMA data_version` moved on a connection held for it; elsewhere, always (the outbox
    look that follows is the check)."""

    def __init__(self, engine: Engine) -> None:
        self._raw: Any = None
        self._seen: int | None = None
        self.interval = SERVER_POLL_S
        if engine.dialect.name == "sqlite":
            self.interval = SQLITE_POLL_S
            self._raw = engine.raw_connection()

    def moved(self) -> bool:
        if self._raw is None:
            return True
        cursor = self._raw.cursor()
        try:
            version = int(cursor.execute("PRAGMA data_version").fetchone()[0])
        finally:
            cursor.close()
        moved, self._seen = version != self._seen, version
        return moved

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()


def watch(
    engine: Engine,
    embedder: Any,
    stop: threading.Event,
    interval: float | None = None,
    signal: threading.Event | None = None,
) -> None:
    """Drain, then wait for the next write and drain again, until `stop` is set. A write
    committed in this process wakes it at once (`engine.write_signal`); writes of other
    processes are seen by the poll of `_OtherWrites` (every `interval` seconds, by default
    its own). A database fault (read-only file, full disk) is one log line and a retry at the
    next wake: the indexer never takes the server down with it, nor prints a traceback."""
    signal = signal if signal is not None else write_signal(engine)
    requeued = False
    others: _OtherWrites | None = None
    try:
        while not stop.is_set():
            signal.clear()
            try:
                if others is None:
                    others = _OtherWrites(engine)
                    others.moved()
                if not requeued:
                    requeue_stale(engine, embedder.model)
                    requeued = True
                drain(engine, embedder, stop=stop)
            except Exception as exc:
                log.warning("semantic indexer: batch failed: %s", _cause(exc))
            wait = interval if interval is not None else others.interval if others else 1.0
            while not stop.is_set() and not signal.wait(wait):
                try:
                    if others is None or others.moved():
                        break
                except Exception as exc:
                    log.warning("semantic indexer: change check failed: %s", _cause(exc))
                    break
    finally:
        if others is not None:
            with contextlib.suppress(Exception):
                others.close()


def _cause(exc: BaseException) -> str:
    from notes_server.store.faults import database_fault

    fault = database_fault(exc)
    return fault.cause if fault is not None else type(exc).__name__


class Background:
    """A `watch` running in a daemon thread; `stop` ends it and waits for the current batch
    (so a shutdown never cuts a write in half, nor prints a traceback)."""

    def __init__(self, engine: Engine, embedder: Any, interval: float | None = None) -> None:
        self._stop = threading.Event()
        self._signal = write_signal(engine)
        self._thread = threading.Thread(
            target=watch,
            args=(engine, embedder, self._stop, interval, self._signal),
            name="semantic-indexer",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._signal.set()
        self._thread.join(timeout)


def start_background(engine: Engine, embedder: Any, interval: float | None = None) -> Background:
    """Start a background indexer for this process (`serve`, stdio or each HTTP worker)."""
    return Background(engine, embedder, interval)
