"""The performance shortcuts give exactly the answers of the paths they short-cut."""

from __future__ import annotations

import copy
import json
import string
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, update

from notes_server.config import Settings
from notes_server.protocol.envelope import EncodedResult, encode_result
from notes_server.protocol.server import McpServer
from notes_server.security import uri
from notes_server.store import grants, notes, search
from notes_server.store.engine import read_tx, write_tx
from tests.helpers import subprocess_env

WS = "file:///home/alice/notes"
NOW = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
PRINTABLE_ASCII = st.text(alphabet=st.sampled_from(string.printable[:95]), min_size=1)


@given(PRINTABLE_ASCII)
def test_printable_ascii_never_trips_the_unicode_segment_checks(segment: str) -> None:
    """Why `_check_segment` may stop early for printable ASCII: none of its later checks can
    refuse such a segment."""
    assert not any(unicodedata.category(ch) in uri._FORBIDDEN_CATEGORIES for ch in segment)
    assert unicodedata.is_normalized("NFC", segment)
    assert not any(uri._is_lookalike(ch) for ch in segment)
    assert unicodedata.normalize("NFKC", segment) == segment


@pytest.mark.parametrize("control", [chr(i) for i in range(32)] + ["\x7f"])
def test_ascii_control_characters_are_still_refused_in_segments(control: str) -> None:
    with pytest.raises(uri.UriError):
        uri.parse_note_path(f"a{control}b.md")


@given(st.lists(PRINTABLE_ASCII.filter(lambda s: s not in (".", "..")), min_size=1, max_size=4))
def test_note_uri_matches_building_it_from_all_segments(path: list[str]) -> None:
    root = uri.parse_workspace_uri(WS)
    segments = tuple(s.replace("/", "_").replace("\\", "_").replace("%", "_") for s in path)
    assert root.note_uri(segments) == uri._build_uri(root.segments + segments)


@given(st.text(max_size=20))
def test_segment_quoting_skips_quote_only_where_quote_changes_nothing(segment: str) -> None:
    assert uri._quote(segment) == quote(segment, safe=uri._SAFE)


@given(st.one_of(st.text(max_size=40), st.text(alphabet="ab./-_~é% \\", max_size=30)))
def test_a_stored_note_uri_is_the_note_uri_of_the_parsed_path(text: str) -> None:
    root = uri.parse_workspace_uri(WS)
    try:
        expected: str | None = root.note_uri(uri.parse_note_path(text))
    except uri.UriError:
        expected = None
    if expected is None:
        with pytest.raises(uri.UriError):
            root.stored_note_uri(text)
    else:
        assert root.stored_note_uri(text) == expected


def test_note_uri_still_counts_the_roots_segments_against_the_limit() -> None:
    root = uri.parse_workspace_uri("file:///" + "/".join(["d"] * (uri.MAX_SEGMENTS - 1)))
    assert root.note_uri(("n.md",)).endswith("/d/n.md")
    with pytest.raises(uri.UriError, match="too many path segments"):
        root.note_uri(("sub", "n.md"))
    with pytest.raises(uri.UriError, match="dot segment"):
        uri.parse_workspace_uri(WS).note_uri(("a", ".."))


@pytest.mark.parametrize("request_id", [1, 0, -7, 2**70, "a", "é", "\ud800", 'q"\\'])
def test_an_encoded_result_is_spliced_byte_for_byte(request_id: int | str) -> None:
    body = {"resultType": "complete", "tools": [{"name": "é", "n": 1.5}], "_meta": {"k": None}}
    assert encode_result(request_id, EncodedResult(body)) == encode_result(request_id, body)


def test_an_encoded_result_cannot_be_changed_behind_its_bytes() -> None:
    result = EncodedResult({"a": 1})
    with pytest.raises(TypeError):
        result["a"] = 2
    with pytest.raises(TypeError):
        result.update(b=3)
    assert dict(result) == {"a": 1}
    for copied in (copy.copy(result), copy.deepcopy(result)):
        copied["a"] = 2  # copies are plain dicts
        assert type(copied) is dict and result["a"] == 1


def test_tools_list_and_discover_are_stamped_and_identical_every_time(
    call: Callable[..., dict[str, Any]], server: McpServer
) -> None:
    first = call("tools/list", id=1)
    again = call("tools/list", id="two")
    assert again["id"] == "two" and again["result"] == first["result"]
    names = [tool["name"] for tool in first["result"]["tools"]]
    assert names == server.registry.names()
    assert first["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == server.server_info
    discover = call("server/discover")["result"]
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"] == server.server_info
    assert call("tools/list", {"cursor": "x"})["error"]["code"] == -32602


def _seed(engine: Engine) -> list[notes.NoteRecord]:
    created = []
    with write_tx(engine) as conn:
        grants.upsert(conn, "alice", WS, "read", NOW)
        for i in range(30):
            created.append(
                notes.insert_note(
                    conn, workspace=WS, path=f"d/{i}.md", title="Same Title", body="x", now=NOW
                )
            )
        conn.execute(
            update(notes.notes)
            .where(notes.notes.c.id == created[3].id)
            .values(archived=True, archived_at=NOW)
        )
    return created


def test_the_sqlite_fast_reads_equal_the_core_reads(migrated_engine: Engine) -> None:
    created = _seed(migrated_engine)
    with read_tx(migrated_engine) as conn:
        for note in [*created, None]:
            note_id = "note_missing" if note is None else note.id
            fast = notes.get_note(conn, WS, note_id)
            core = notes._GET_NOTE.statement
            row = conn.execute(core, {"note_id": note_id, "workspace": WS}).first()
            assert fast == (None if row is None else notes.NoteRecord.from_row(row))
        archived = notes.get_note(conn, WS, created[3].id)
        assert archived is not None and archived.archived is True
        assert archived.archived_at == NOW and archived.created_at == NOW
        assert grants.role_for(conn, "alice", WS) == "read"
        assert grants.role_for(conn, "bob", WS) is None
        assert notes.get_note(conn, "file:///home/alice/other", created[0].id) is None


def test_fast_search_reads_equal_the_core_reads(migrated_engine: Engine) -> None:
    created = _seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, created[5], now=NOW, body="alpha beta gamma")
    with read_tx(migrated_engine) as conn:
        for archived in (False, True):
            values = {"workspace": WS, "limit": 50, "offset": 0, "match": '"same"*'}
            recent = search._RECENT[archived].all(conn, values)
            assert [notes.NoteRecord.from_driver_row(r) for r in recent] == [
                notes.NoteRecord.from_row(r)
                for r in conn.execute(search._RECENT[archived].statement, values).all()
            ]
        hits = search.search(conn, WS, "alpha", include_archived=False, limit=5, offset=0)
        assert [h.note.id for h in hits] == [created[5].id]


def test_candidate_lookups_scan_only_the_title_index_without_statistics(
    migrated_engine: Engine,
) -> None:
    _seed(migrated_engine)
    with read_tx(migrated_engine) as conn:
        compiled = notes._CANDIDATES.statement.compile(dialect=conn.dialect)
        params = compiled.construct_params(
            {
                "workspace": WS,
                "title_key": "same",
                "archived": False,
                "limit": 10,
            }
        )
        ordered = [params[name] for name in compiled.positiontup or []]
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), tuple(ordered)).all()
        found, total = notes.find_candidates(conn, WS, "SAME", limit=10)
    details = " | ".join(str(row[-1]) for row in plan)
    assert "COVERING INDEX ix_notes_workspace_title" in details, details
    assert "ix_notes_workspace_updated" not in details, details
    assert len(found) == 10 and total == 29 and all(not n.archived for n in found)


def test_fast_candidate_reads_equal_the_core_reads(migrated_engine: Engine) -> None:
    _seed(migrated_engine)
    values = {"workspace": WS, "title_key": "title", "archived": False}
    with read_tx(migrated_engine) as conn:
        fast = notes._CANDIDATES.all(conn, {**values, "limit": 10})
        core = conn.execute(notes._CANDIDATES.statement, {**values, "limit": 10}).all()
    assert [notes.NoteRecord.from_driver_row(r) for r in fast] == [
        notes.NoteRecord.from_row(r) for r in core
    ]
    assert {r[-1] for r in fast} == {r[-1] for r in core} == {29}


def _run_probe(probe: str) -> Any:
    """Run `probe` in a fresh interpreter (a clean sys.modules); its printed JSON."""
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return json.loads(completed.stdout)


def test_serving_discover_and_tools_list_loads_no_sqlalchemy(
    settings: Settings, migrated_engine: Engine
) -> None:
    """Cold start: the first answers come before the store (SQLAlchemy) is imported, and
    before hashlib (it loads OpenSSL: ~2.5 ms of a start) or secrets, which load it."""
    probe = f"""
import json, sys
from notes_server.cli.database import ensure_schema
from notes_server.app import create_server
from notes_server.config import build_settings
settings = build_settings(db={settings.db_url!r}, principal="alice")
ensure_schema(settings)
server = create_server(settings)
meta = {{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientCapabilities": {{}}}}
for method in ("server/discover", "tools/list"):
    raw = json.dumps({{"jsonrpc": "2.0", "id": 1, "method": method, "params": {{"_meta": meta}}}})
    assert b'"result"' in server.handle_raw(raw.encode(), "alice")
loaded = ("sqlalchemy", "alembic", "hashlib", "secrets", "_hashlib")
print(json.dumps(sorted(m for m in loaded if m in sys.modules)))
"""
    assert _run_probe(probe) == []


def test_tool_calls_never_load_the_orm(settings: Settings, migrated_engine: Engine) -> None:
    """The schema is Core tables: the first tool call does not pay for `sqlalchemy.orm`."""
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", "file:///w", "read", NOW)
    probe = f"""
import json, sys
from notes_server.app import create_server
from notes_server.config import build_settings
server = create_server(build_settings(db={settings.db_url!r}, principal="alice"))
meta = {{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientCapabilities": {{}}}}
for name, args in (("notes_search", {{"query": "x"}}), ("notes_read", {{"noteId": "note_1"}})):
    params = {{"name": name, "arguments": {{"workspaceUri": "file:///w", **args}}, "_meta": meta}}
    raw = json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}})
    assert b'"result"' in server.handle_raw(raw.encode(), "alice")
print(json.dumps(["sqlalchemy" in sys.modules, "sqlalchemy.orm" in sys.modules]))
"""
    assert _run_probe(probe) == [True, False]


SERVE_IMPORTTIME = (sys.executable, "-X", "importtime", "-m", "notes_server", "serve")


def test_a_stdio_serve_answers_discover_without_loading_the_other_commands(
    settings: Settings, migrated_engine: Engine, tmp_path: Path
) -> None:
    """Cold start: `serve` imports neither the modules of `call`, `token`, `audit`, the folder
    commands, `host-config`, nor `socket` (the purge listener binds through `_socket`), nor,
    for a 2026-07-28 client, the 2025-11-25 session machinery."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    done = subprocess.run(
        [*SERVE_IMPORTTIME, "--db", settings.db_url, "--principal", "alice"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(tmp_path),
        cwd=tmp_path,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }

    assert json.loads(done.stdout)["result"]["resultType"] == "complete"
    assert "notes_server.cli.main" in imported
    unwanted = {
        "notes_server.cli.call",
        "notes_server.cli.client.session",
        "notes_server.cli.token",
        "notes_server.cli.audit",
        "notes_server.cli.folders",
        "notes_server.cli.host_config",
        "notes_server.cli.workspace",
        "socket",
        "notes_server.compat_2025.session",
        "notes_server.compat_2025.channel",
        "notes_server.compat_2025.rounds",
        "notes_server.compat_2025.roots",
        "notes_server.compat_2025.translate",
    }
    assert sorted(unwanted & imported) == []
