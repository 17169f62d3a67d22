"""The subscription hub in process: a reader that never drains is dropped at its bound and
nobody else is slowed; the per-principal cap refuses clearly; one feed listener for all."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from notes_server.errors import InvalidParams
from notes_server.features.subscriptions import hub as hub_module
from notes_server.features.subscriptions.hub import Filter, SubscriptionHub
from notes_server.store import changes, notes
from notes_server.store.engine import write_tx
from notes_server.tools.services import Services

Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
WRITER = notes.Author("writer", "test")


def test_a_reader_that_never_drains_is_dropped_and_the_others_get_everything(
    services: Services, migrated_engine: Engine, grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "QUEUE_LIMIT", 3)
    grant("alice", NOTES)
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(
            conn, workspace=NOTES, path="a.md", title="A", body="", now=NOW, author=WRITER
        )
    hub = SubscriptionHub(services)
    wanted = Filter(resource_subscriptions=(f"{NOTES}/a.md",))
    slow, fast = hub.open("alice", "slow", wanted), hub.open("alice", "fast", wanted)
    arrived = threading.Semaphore(0)
    fast.attach(arrived.release)
    received: list[bytes] = []
    try:
        for count in range(1, 5):
            with write_tx(migrated_engine) as conn:
                note = notes.update_fields(conn, note, now=NOW, author=WRITER, body="x") or note
            while True:  # wake-ups may coalesce: drain until this change has arrived
                assert arrived.acquire(timeout=10)
                messages, _ended = fast.drain()
                received.extend(messages)
                if sum(b"resources/updated" in m for m in received) == count:
                    break

        assert slow.dropped
        assert slow.drain() == ([], True)
        assert sum(b"resources/updated" in m for m in received) == 4
        assert hub.open_count() == 1
    finally:
        fast.close()
        slow.close()
    assert hub.open_count() == 0


def test_the_per_principal_cap_refuses_clearly_and_spares_other_principals(
    services: Services,
) -> None:
    hub = SubscriptionHub(services, max_per_principal=2)
    opened = [hub.open("alice", 1, Filter()), hub.open("alice", 2, Filter())]
    try:
        with pytest.raises(InvalidParams) as refused:
            hub.open("alice", 3, Filter())
        opened.append(hub.open("bob", 4, Filter()))

        assert refused.value.code == -32602
        assert refused.value.message == "Too many open subscriptions: at most 2 per principal"
        assert refused.value.data == {"limit": 2}
        assert changes.feed(services.engine).listeners() == 1  # one feed listener for the hub
    finally:
        for listen in opened:
            listen.close()
    assert changes.feed(services.engine).listeners() == 0
