"""A rename (`notes_update` of a title) or a move (`notes_move` of a path) on PostgreSQL, with
another server process writing a note that links to the old name while the rename's
transaction is open, each ordering staged exactly (no timing): a test connection holds a row
lock that stops one transaction at a known statement, and the database's own
`pg_blocking_pids` tells when the other has reached its wait (as PostgreSQL's isolation tester
does). Whatever the order, no link is lost: the outcome is the one of the two writes run one
after the other, in the order they took the workspace.

- An edit of a linking note sent while the rename is stopped after reading its linking notes
  waits, then lands on the rewritten version: new name and edit both kept, link resolved.
- A note created with the old name while the rename is stopped comes after it: its link names
  a note that no longer has that name and stays unresolved (as one written a moment later).
- A note created with the old name and still uncommitted when the rename starts comes before
  it: the rename waits for it and rewrites it too.

PostgreSQL only by nature: SQLite runs one write transaction at a time (BEGIN IMMEDIATE), so
these interleavings cannot happen there; tests/concurrency/test_rename_edit_race.py races the
same writers on both backends.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests import pg_support
from tests.concurrency.harness import (
    TIMEOUT_S,
    WORKSPACE,
    Server,
    generate_keys,
    prepare_database,
    start_servers,
)
from tests.concurrency.harness import stop_servers as stop

pytestmark = pytest.mark.skipif(
    not pg_support.on_postgresql(),
    reason="PostgreSQL only: SQLite runs one write transaction at a time, so a write cannot "
    "interleave with a rename there (test_rename_edit_race covers SQLite)",
)


class Rename(NamedTuple):
    """One way to change a note's name, and the wiki link that names it before and after."""

    old_link: str
    new_link: str
    tool: str
    arguments: dict[str, Any]


KINDS = ("title", "path")


def rename_for(kind: str, tag: str) -> Rename:
    """The rename of this test's target ("Old <tag>" at <tag>/old.md): names of its own, as
    the module's tests share one database."""
    if kind == "title":
        return Rename(f"[[Old {tag}]]", f"[[New {tag}]]", "notes_update", {"title": f"New {tag}"})
    return Rename(
        f"[[{tag}/old.md]]",
        f"[[{tag}/new.md]]",
        "notes_move",
        {"targetWorkspaceUri": WORKSPACE, "path": f"{tag}/new.md"},
    )


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = pg_support.database_url(tmp_path_factory.mktemp("pg-rename"), per_test=False)
    try:
        prepare_database(url)
        yield url
    finally:
        pg_support.drop_database(url)


@pytest.fixture(scope="module")
def servers(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    """The renaming process and the writing one."""
    root: Path = tmp_path_factory.mktemp("pg-rename-servers")
    # No semantic indexer: it locks a new note's row FOR SHARE while it stores its vectors, so
    # it too could wait on the gate's row lock and be taken for the rename (the create then
    # lands before the rename reads its linking notes).
    started = start_servers(
        database, generate_keys(), root, 2, settings={"NOTES_SERVER_SEMANTIC": "off"}
    )
    try:
        yield started
    finally:
        stop(started)
    for server in started:
        assert server.alarms() == [], server.stderr_text()[-2000:]


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> str:
    """This test's own word for its names (test and parameters)."""
    return "".join(c if c.isalnum() else "-" for c in request.node.name).strip("-")


@pytest.fixture
def target(servers: list[Server], tag: str) -> dict[str, Any]:
    """The note about to be renamed or moved."""
    note: dict[str, Any] = tool(
        servers[0], "notes_create", title=f"Old {tag}", path=f"{tag}/old.md"
    )["note"]
    return note


def tool(server: Server, name: str, **arguments: Any) -> dict[str, Any]:
    reply = server.tool(name, {"workspaceUri": WORKSPACE, **arguments})
    assert "error" not in reply, reply
    assert reply["result"]["isError"] is False, reply
    result: dict[str, Any] = reply["result"]["structuredContent"]
    return result


class Pending:
    """A request written to a server whose reply is read on a thread: the test goes on
    while the server's transaction waits in the database."""

    def __init__(self, server: Server, name: str, arguments: dict[str, Any]) -> None:
        self._replies: queue.Queue[dict[str, Any] | BaseException] = queue.Queue()
        params = {"name": name, "arguments": {"workspaceUri": WORKSPACE, **arguments}}
        server.write(server.encode("tools/call", params))
        threading.Thread(target=self._read, args=(server,), daemon=True).start()

    def _read(self, server: Server) -> None:
        try:
            self._replies.put(server.read())
        except BaseException as exc:  # handed to the test by result()
            self._replies.put(exc)

    def answered(self) -> bool:
        return not self._replies.empty()

    def result(self) -> dict[str, Any]:
        reply = self._replies.get(timeout=TIMEOUT_S)
        if isinstance(reply, BaseException):
            raise reply
        assert "error" not in reply, reply
        assert reply["result"]["isError"] is False, reply
        result: dict[str, Any] = reply["result"]["structuredContent"]
        return result


class Gate:
    """A test connection: holds locks that stop a server's transaction at a known statement,
    and sees who waits for whom."""

    def __init__(self, url: str) -> None:
        import psycopg
        from sqlalchemy.engine.url import make_url

        parsed = make_url(url)
        params = {"host": parsed.host, "port": parsed.port or 5432, "dbname": parsed.database}
        params["user"] = parsed.username or "postgres"
        self.locks = psycopg.connect(**params)  # one open transaction while a gate is shut
        self.watch = psycopg.connect(**params, autocommit=True)
        self.pid = int(self.locks.info.backend_pid)

    @contextmanager
    def row_locked(self, note_id: str) -> Iterator[None]:
        """The note's row locked as an UPDATE of it locks it: another UPDATE waits until the
        end; a link to it (a foreign key's KEY SHARE check) does not."""
        self.locks.execute("SELECT 1 FROM notes WHERE id = %s FOR NO KEY UPDATE", (note_id,))
        try:
            yield
        finally:
            self.locks.rollback()

    @contextmanager
    def path_taken(self, note: dict[str, Any], path: str) -> Iterator[None]:
        """An uncommitted note at ``path``: an INSERT of another note there waits for this
        transaction (the unique index), then goes on when it rolls back."""
        self.locks.execute(
            "INSERT INTO notes (id, workspace, path, title, title_key, body, created_at, "
            "updated_at, version, archived) SELECT 'note_gate', workspace, %s, 'gate', "
            "'gate', '', now(), now(), 1, false FROM notes WHERE id = %s",
            (path, note["id"]),
        )
        try:
            yield
        finally:
            self.locks.rollback()

    def waiting_for(self, pid: int, *, unless: Pending | None = None) -> int | None:
        """The backend that waits for a lock ``pid`` holds, once one does; None if ``unless``
        is answered first (a request that never had to wait)."""
        deadline = time.monotonic() + TIMEOUT_S  # a safety net: a hung wait fails the test
        while unless is None or not unless.answered():
            assert time.monotonic() < deadline, f"nothing waited for backend {pid}"
            rows = self.watch.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
            ).fetchall()
            if rows:
                assert len(rows) == 1, rows
                return int(rows[0][0])
        return None

    def close(self) -> None:
        self.locks.close()
        self.watch.close()


@pytest.fixture
def gate(database: str) -> Iterator[Gate]:
    opened = Gate(database)
    try:
        yield opened
    finally:
        opened.close()


def start_rename(server: Server, note: dict[str, Any], rename: Rename) -> Pending:
    return Pending(server, rename.tool, {"noteId": note["id"], **rename.arguments})


def write_during_a_rename(
    gate: Gate,
    renamer: Server,
    target: dict[str, Any],
    rename: Rename,
    writer: Server,
    name: str,
    arguments: dict[str, Any],
) -> tuple[Pending, Pending, bool]:
    """Start the rename, hold it where it has read its linking notes and waits to write the
    renamed note, then send the writer's call: (the rename, the write, whether the write waited
    for the rename)."""
    with gate.row_locked(target["id"]):
        renaming = start_rename(renamer, target, rename)
        rename_pid = gate.waiting_for(gate.pid)
        assert rename_pid is not None
        writing = Pending(writer, name, arguments)
        waited = gate.waiting_for(rename_pid, unless=writing) is not None
    return renaming, writing, waited


def incoming_ids(server: Server, note: dict[str, Any]) -> list[str]:
    return [back["id"] for back in tool(server, "notes_links", noteId=note["id"])["incoming"]]


@pytest.mark.parametrize("kind", KINDS)
def test_a_linking_note_edited_during_a_rename_waits_and_keeps_both_changes(
    servers: list[Server], gate: Gate, target: dict[str, Any], kind: str, tag: str
) -> None:
    renamer, writer = servers
    rename = rename_for(kind, tag)
    body = f"# Log\nsee {rename.old_link}\n\n## Edits\nstart\n"
    linking = tool(renamer, "notes_create", title=f"Linking {tag}", body=body)["note"]
    edit = [{"section": "Log/Edits", "action": "append", "text": "edited meanwhile"}]

    renaming, editing, edit_waited = write_during_a_rename(
        gate,
        renamer,
        target,
        rename,
        writer,
        "notes_edit",
        {"noteId": linking["id"], "edits": edit},
    )

    renamed = renaming.result()
    edited = editing.result()
    assert [note["id"] for note in renamed["rewritten"]] == [linking["id"]]
    final = f"# Log\nsee {rename.new_link}\n\n## Edits\nstart\nedited meanwhile\n"
    assert tool(writer, "notes_read", noteId=linking["id"])["note"]["body"] == final
    assert edited["note"]["version"] == 3  # created, rewritten, edited on the rewritten one
    outgoing = tool(writer, "notes_links", noteId=linking["id"])["outgoing"]
    assert [(link["resolved"], link.get("id")) for link in outgoing] == [(True, target["id"])]
    history = tool(writer, "notes_history", noteId=linking["id"])["versions"]
    assert [(r["version"], r["tool"]) for r in history] == [
        (3, "notes_edit"),
        (2, "link rewrite"),
        (1, "notes_create"),
    ]
    # The edit was not applied while the rename was in flight: it waited for it.
    assert edit_waited


@pytest.mark.parametrize("kind", KINDS)
def test_a_note_created_with_the_old_name_during_a_rename_comes_after_it_unresolved(
    servers: list[Server], gate: Gate, target: dict[str, Any], kind: str, tag: str
) -> None:
    renamer, writer = servers
    rename = rename_for(kind, tag)
    body = f"written during the rename: {rename.old_link}\n"

    renaming, creating, create_waited = write_during_a_rename(
        gate,
        renamer,
        target,
        rename,
        writer,
        "notes_create",
        {"title": f"Late {tag}", "body": body},
    )

    assert renaming.result()["rewritten"] == []
    created = creating.result()["note"]
    # Applied after the rename: the old name names nothing now, and the result says so.
    assert created["body"] == body
    read = tool(writer, "notes_read", noteId=created["id"])["note"]
    assert read["links"] == {"outgoing": 1, "unresolved": 1, "incoming": 0}
    outgoing = tool(writer, "notes_links", noteId=created["id"])["outgoing"]
    assert [(link["text"], link["resolved"]) for link in outgoing] == [
        (rename.old_link.strip("[]"), False)
    ]
    assert created["id"] not in incoming_ids(writer, target)
    assert create_waited  # not applied while the rename was in flight: it waited


@pytest.mark.parametrize("kind", KINDS)
def test_a_note_created_with_the_old_name_before_a_rename_is_rewritten_by_it(
    servers: list[Server], gate: Gate, target: dict[str, Any], kind: str, tag: str
) -> None:
    renamer, writer = servers
    rename = rename_for(kind, tag)
    body = f"written just before the rename: {rename.old_link}\n"
    path = f"{tag}/early.md"

    with gate.path_taken(target, path):
        # The create is under way (its INSERT waits on the gate's row) when the rename starts.
        creating = Pending(
            writer, "notes_create", {"title": f"Early {tag}", "body": body, "path": path}
        )
        create_pid = gate.waiting_for(gate.pid)
        assert create_pid is not None
        renaming = start_rename(renamer, target, rename)
        rename_waited = gate.waiting_for(create_pid, unless=renaming) is not None

    created = creating.result()["note"]
    renamed = renaming.result()
    assert [note["id"] for note in renamed["rewritten"]] == [created["id"]]
    final = f"written just before the rename: {rename.new_link}\n"
    assert tool(writer, "notes_read", noteId=created["id"])["note"]["body"] == final
    outgoing = tool(writer, "notes_links", noteId=created["id"])["outgoing"]
    assert [(link["resolved"], link.get("id")) for link in outgoing] == [(True, target["id"])]
    assert incoming_ids(writer, target) == [created["id"]]
    assert rename_waited  # the rename waited for the create under way
