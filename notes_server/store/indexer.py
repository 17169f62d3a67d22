"""The background indexer of semantic search: outbox rows to vectors, never inside a writer's
transaction (`semantic` has the steps). Used by `serve` (a daemon thread) and by
`notes-server index [--watch]` (its own process); several may run on one PostgreSQL."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from notes_server.store import semantic
from notes_server.store.engine import retrying, write_tx

log = logging.getLogger("notes_server.indexer")
BATCH = 32


def run_once(engine: Engine, embedder: Any, batch: int = BATCH) -> tuple[int, int]:
    """Claim, embed and store one batch: (notes claimed, passages written)."""
    with write_tx(engine) as conn:
        work = semantic.claim(conn, datetime.now(UTC), batch)
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
    stop: threading.Event | None = None,
) -> int:
    """Run batches until the outbox has nothing claimable; returns passages written."""
    total = 0
    while stop is None or not stop.is_set():
        claimed, passages = run_once(engine, embedder)
        if not claimed:
            break
        total += passages
        if progress is not None:
            progress(claimed, passages)
    return total


def requeue_stale(engine: Engine, model: str) -> int:
    with write_tx(engine) as conn:
        return semantic.enqueue_stale(conn, model)


def watch(engine: Engine, embedder: Any, stop: threading.Event, interval: float = 1.0) -> None:
    """Drain, then poll the outbox every `interval` seconds until `stop` is set. A database
    fault (read-only file, full disk) is one log line and a retry at the next tick: the
    indexer never takes the server down with it, nor prints a traceback."""
    requeued = False
    while not stop.is_set():
        try:
            if not requeued:
                requeue_stale(engine, embedder.model)
                requeued = True
            drain(engine, embedder, stop=stop)
        except Exception as exc:
            log.warning("semantic indexer: batch failed: %s", _cause(exc))
        stop.wait(interval)


def _cause(exc: BaseException) -> str:
    from notes_server.store.faults import database_fault

    fault = database_fault(exc)
    return fault.cause if fault is not None else type(exc).__name__


def start_background(engine: Engine, embedder: Any) -> threading.Event:
    """A daemon thread running `watch`; set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=watch, args=(engine, embedder, stop), name="semantic-indexer", daemon=True
    )
    thread.start()
    return stop
