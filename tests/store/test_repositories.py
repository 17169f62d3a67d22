"""The two repository implementations: the SQLite one (DB-API fast path) and the portable Core
one return identical values, and the engine picks between them in one place."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event

from notes_server.config import SettingsError, build_settings
from notes_server.store import audit, grants, migrate, nonces, notes, search
from notes_server.store.engine import make_engine, read_tx, write_tx
from notes_server.tools.services import Services

WS = "file:///home/alice/notes"
OTHER = "file:///home/bob/notes"
NOW = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Engine]:
    """Notes in two workspaces (one archived), a grant, a claimed nonce and an audit entry."""
    engine = make_engine(f"sqlite:///{tmp_path}/seeded.db")
    migrate.upgrade(engine)
    with write_tx(engine) as conn:
        for i in range(6):
            note = notes.insert_note(
                conn,
                workspace=WS if i % 3 else OTHER,
                path=f"n{i}.md",
                title=f"Report {i}",
                body=f"quarterly report number {i} with figures",
                now=NOW + timedelta(minutes=i, microseconds=i),
            )
        notes.update_fields(
            conn, note, now=NOW + timedelta(hours=1), archived=True, archived_at=NOW
        )
        grants.upsert(conn, "alice", WS, "write", NOW)
        nonces.claim(
            conn,
            nonce="n1",
            principal="alice",
            tool="notes_delete",
            outcome="deleted",
            answer_digest="d" * 64,
            result_json='{"deleted":true}',
            now=NOW,
            expires_at=NOW + timedelta(minutes=2),
        )
        audit.record(
            conn,
            audit.AuditRecord(NOW, "alice", "notes_delete", "deleted", WS, "x", "T", "p", "n1"),
        )
    try:
        yield engine
    finally:
        engine.dispose()


def _other_id(conn: Connection) -> str:
    """A note of the workspace alice has no grant on."""
    other = notes.get_note_by_path(conn, OTHER, "n0.md")
    assert other is not None
    return other.id


def _everything(conn: Connection, impl: str) -> dict[str, Any]:
    """What each repository of one implementation returns for the seeded data."""
    pick = {"sqlite": "SQLITE", "core": "CORE"}[impl]
    note_store: notes.NoteStore = getattr(notes, pick)
    search_store: search.SearchStore = search.SQLITE if impl == "sqlite" else search.SQLITE_CORE
    some = note_store.get_by_path(conn, WS, "n1.md")
    assert some is not None
    found: dict[str, Any] = {
        "get": note_store.get(conn, WS, some.id),
        "candidates": note_store.find_candidates(conn, WS, "report", limit=10),
        "role": getattr(grants, pick).role_for(conn, "alice", WS),
        "granted": note_store.get_granted(conn, "alice", WS, some.id),
        "granted, no such note": note_store.get_granted(conn, "alice", WS, "note_missing"),
        "granted, note elsewhere": note_store.get_granted(conn, "alice", WS, _other_id(conn)),
        "not granted": note_store.get_granted(conn, "bob", WS, some.id),
        "grants": getattr(grants, pick).list(conn, None),
        "nonce": getattr(nonces, pick).get(conn, "n1"),
        "audit": getattr(audit, pick).recent(conn, workspace=WS, principal=None, limit=5),
    }
    for query in (None, "quarterly figures", "report 4"):
        for archived in (False, True):
            found[f"search {query} {archived}"] = search_store.search(
                conn, WS, query, include_archived=archived, limit=10, offset=0
            )
    return found


def test_both_implementations_return_identical_values(seeded: Engine) -> None:
    with read_tx(seeded) as conn:
        fast, core = _everything(conn, "sqlite"), _everything(conn, "core")
    assert fast == core
    assert len(fast["candidates"][0]) == 3 and fast["candidates"][1] == 3
    assert fast["granted"] == notes.Granted("write", fast["get"])
    assert fast["granted, no such note"] == notes.Granted("write", None)
    assert fast["granted, note elsewhere"] == notes.Granted("write", None)
    assert fast["not granted"] is None
    assert len(fast["search quarterly figures True"]) == 4
    assert len(fast["search quarterly figures False"]) == 3
    # Same types too: equal datetimes may differ in awareness only on the way to a comparison.
    for value in (fast["get"], core["get"], *fast["candidates"][0], *core["candidates"][0]):
        assert value.created_at.tzinfo is UTC and value.updated_at.tzinfo is UTC
        assert type(value.archived) is bool
    archived = [h.note for h in core["search None True"] if h.note.archived]
    assert archived and all(n.archived_at == NOW for n in archived)


def _picked(engine: Engine) -> str:
    """Which implementation every repository uses on this engine ("sqlite" or "core")."""
    with engine.connect() as conn:
        picked = {
            notes.store(conn) is notes.SQLITE,
            grants.store(conn) is grants.SQLITE,
            nonces.store(conn) is nonces.SQLITE,
            audit.store(conn) is audit.SQLITE,
            search.store(conn) is search.SQLITE,
        }
        assert len(picked) == 1
        if not picked.pop():
            assert search.store(conn) is search.SQLITE_CORE  # still FTS5 on SQLite
            return "core"
    return "sqlite"


def test_the_engine_picks_the_sqlite_implementation_unless_core_is_forced(
    tmp_path: Path,
) -> None:
    chosen = {}
    for impl in ("auto", "core"):
        engine = make_engine(f"sqlite:///{tmp_path}/pick.db", store_impl=impl)
        try:
            chosen[impl] = _picked(engine)
        finally:
            engine.dispose()
    assert chosen == {"auto": "sqlite", "core": "core"}


def test_the_server_engine_follows_the_store_impl_setting(tmp_path: Path) -> None:
    for value, expected in (("", "sqlite"), ("core", "core"), ("auto", "sqlite")):
        env = {"NOTES_SERVER_STORE_IMPL": value, "XDG_DATA_HOME": str(tmp_path)}
        settings = build_settings(db=f"sqlite:///{tmp_path}/s.db", env=env)
        services = Services(settings)
        try:
            assert _picked(services.engine) == expected, value
        finally:
            services.engine.dispose()


def test_an_unknown_store_implementation_is_refused_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(
        SettingsError, match=r"^NOTES_SERVER_STORE_IMPL: expected one of auto, core$"
    ):
        build_settings(db=f"sqlite:///{tmp_path}/x.db", env={"NOTES_SERVER_STORE_IMPL": "fast"})
    with pytest.raises(ValueError, match=r"store_impl must be one of auto, core, not 'fast'"):
        make_engine(f"sqlite:///{tmp_path}/x.db", store_impl="fast")


def test_the_portable_search_finds_every_word_newest_first_in_scope(seeded: Engine) -> None:
    """The LIKE fallback other databases get (until they bring a full-text index) is the
    generic Core code, so it runs here on SQLite."""
    with read_tx(seeded) as conn:
        live = search.PORTABLE.search(
            conn, WS, "QUARTERLY figures", include_archived=False, limit=10, offset=0
        )
        every = search.PORTABLE.search(
            conn, WS, "quarterly", include_archived=True, limit=2, offset=1
        )
        none = search.PORTABLE.search(conn, WS, "?!", include_archived=True, limit=10, offset=0)
        recent = search.PORTABLE.search(conn, WS, None, include_archived=False, limit=10, offset=0)
    assert [h.note.path for h in live] == ["n4.md", "n2.md", "n1.md"]
    assert [h.note.path for h in every] == ["n4.md", "n2.md"]
    assert none == []
    assert [h.note.path for h in recent] == ["n4.md", "n2.md", "n1.md"]
    assert live[0].snippet == "**quarterly** report number 4 with **figures**"
    assert live[0].rank == 0.0


def test_only_the_sqlite_implementation_bypasses_core_for_the_hot_statements(
    seeded: Engine,
) -> None:
    executed: list[str] = []
    event.listen(seeded, "before_cursor_execute", lambda *a: executed.append(a[2]))
    counts = {}
    with read_tx(seeded) as conn:
        note = notes.CORE.get_by_path(conn, WS, "n1.md")
        assert note is not None
        for impl in ("SQLITE", "CORE"):
            executed.clear()
            assert getattr(notes, impl).get(conn, WS, note.id) == note
            getattr(notes, impl).find_candidates(conn, WS, "report", limit=3)
            assert getattr(grants, impl).role_for(conn, "alice", WS) == "write"
            assert getattr(nonces, impl).get(conn, "n1") is not None
            counts[impl] = len(executed)
    assert counts == {"SQLITE": 0, "CORE": 4}
