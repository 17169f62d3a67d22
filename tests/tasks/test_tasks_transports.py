"""Tasks over the real transports: a stdio server process whose client goes away finishes the
task it started, and another process answers `tasks/get` from the database; HTTP routes the
task methods by their `Mcp-Name` header (the task id)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.features.tasks.runner import TaskRunner
from notes_server.tools.services import Services
from tests.helpers import ServerProcess, make_request
from tests.tasks.conftest import FILES, NOTES, TASKS, WAIT_S, with_runner

TESTS = Path(__file__).resolve().parents[1]
FIXTURE_ENV = {"PYTHONPATH": f"{TESTS}:{TESTS.parent}"}
FIXTURE_ARGS = ("--sandbox", "off", "--tools-module", "tests.tasks.fixture_tools")
COUNTS_50 = {"imported": FILES, "unchanged": 0, "skipped": 0, "refused": 0, "problems": []}
IMPORT = {"name": "notes_import", "arguments": {"workspaceUri": NOTES}}


@pytest.mark.usefixtures("vault")
def test_a_stdio_task_outlives_its_client_and_another_process_answers_for_it(
    spawn_server: Callable[..., ServerProcess],
) -> None:
    first = spawn_server()
    created = first.request("tools/call", IMPORT, caps=TASKS)["result"]
    assert (created["resultType"], created["status"]) == ("task", "working")

    assert first.close() == 0  # the client went away; the process finished the task first

    second = spawn_server()
    done = second.request("tasks/get", {"taskId": created["taskId"]}, caps=TASKS)["result"]
    bob = spawn_server(principal="bob")
    hidden = bob.request("tasks/get", {"taskId": created["taskId"]}, caps=TASKS)

    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == COUNTS_50
    assert hidden["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert (
        second.request("tasks/get", {"taskId": created["taskId"]}, caps={})["error"]["code"]
        == -32021
    )


@pytest.mark.usefixtures("migrated_engine")
def test_a_stdio_server_finishes_a_task_its_client_left_before_it_exits(
    spawn_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """The task cannot end before the test writes to the FIFO, which it does only after the
    client closed stdin: the result holds what was written, so the work ran on after the
    disconnect and the process waited for it."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    first = spawn_server(*FIXTURE_ARGS, env=FIXTURE_ENV)
    call = {"name": "test_reads_fifo", "arguments": {"fifo": str(fifo)}}
    task_id = first.request("tools/call", call, caps=TASKS)["result"]["taskId"]
    assert first.proc.stdin is not None
    first.proc.stdin.close()  # the client goes away with the task still working

    def release() -> None:
        with open(fifo, "w", encoding="utf-8") as gate:  # opens once the task reads
            gate.write("after the client left")

    writer = threading.Thread(target=release, daemon=True)  # bounded, should the task not read
    writer.start()
    writer.join(WAIT_S)
    assert not writer.is_alive()
    assert first.close() == 0  # stdin is closed already: waits for the exit, closes stdout

    second = spawn_server(*FIXTURE_ARGS, env=FIXTURE_ENV)
    done = second.request("tasks/get", {"taskId": task_id}, caps=TASKS)["result"]
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"read": "after the client left"}


@pytest.mark.usefixtures("vault")
def test_a_stdio_client_without_the_extension_keeps_its_progress_notifications(
    spawn_server: Callable[..., ServerProcess],
) -> None:
    server = spawn_server()
    message = make_request("tools/call", IMPORT)
    message["params"]["_meta"]["progressToken"] = "p"
    server.send(message)

    lines = [server.read()]
    while "id" not in lines[-1]:
        lines.append(server.read())

    assert lines[0]["method"] == "notifications/progress"
    assert lines[-1]["result"]["resultType"] == "complete"
    assert lines[-1]["result"]["structuredContent"] == COUNTS_50


HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def http(settings: Settings, task_services: Services, runner: TaskRunner) -> Iterator[TestClient]:
    app = create_http_app(
        settings,
        HttpSettings(auth="none"),
        task_services,
        with_runner(task_services, runner),
    )
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client


def post(client: TestClient, method: str, params: dict[str, Any], name: str) -> Any:
    headers = {
        **HEADERS,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    message = make_request(method, params, caps=TASKS)
    return client.post("/mcp", content=json.dumps(message), headers=headers)


@pytest.mark.usefixtures("vault")
def test_http_creates_a_task_and_answers_tasks_get_named_by_its_id(
    http: TestClient, runner: TaskRunner
) -> None:
    created = post(http, "tools/call", IMPORT, "notes_import")
    task_id = created.json()["result"]["taskId"]
    assert (created.status_code, created.json()["result"]["resultType"]) == (200, "task")
    assert runner.join(task_id, WAIT_S)

    done = post(http, "tasks/get", {"taskId": task_id}, task_id)
    misnamed = post(http, "tasks/get", {"taskId": task_id}, "notes_import")
    cancelled_late = post(http, "tasks/cancel", {"taskId": task_id}, task_id)

    assert done.status_code == 200
    assert done.json()["result"]["status"] == "completed"
    assert done.json()["result"]["result"]["structuredContent"] == COUNTS_50
    assert misnamed.status_code == 400
    assert misnamed.json()["error"] == {
        "code": -32020,
        "message": "Header mismatch: Mcp-Name header does not match the request body",
    }
    assert cancelled_late.json()["result"]["resultType"] == "complete"
    after = post(http, "tasks/get", {"taskId": task_id}, task_id)
    assert after.json()["result"]["status"] == "completed"  # a finished task stays finished


@pytest.mark.usefixtures("vault")
def test_a_2025_session_declaring_the_extension_still_gets_ordinary_calls(
    spawn_server: Callable[..., ServerProcess],
) -> None:
    server = spawn_server()
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "clientInfo": {"name": "t", "version": "1"},
    }
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert "io.modelcontextprotocol/tasks" not in json.dumps(server.read()["result"])
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": IMPORT})
    called = server.read()
    server.send({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t"}})

    assert called["result"]["structuredContent"] == COUNTS_50
    assert server.read()["error"] == {"code": -32601, "message": "Method not found: tasks/get"}
