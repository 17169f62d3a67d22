"""The Tasks extension in process: `notes_import` as a task, `tasks/get`, `tasks/cancel`,
`tasks/update`, principals, expiry, and calls that stay ordinary calls."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from notes_server.app import create_server
from notes_server.config import Settings
from notes_server.errors import InvalidParams, ToolFailure
from notes_server.features.extension import Extension
from notes_server.features.folders import importer
from notes_server.features.folders.tool import TASK_BATCH
from notes_server.features.tasks import runner as runner_module
from notes_server.features.tasks.runner import TaskRunner, iso
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.services import Services
from tests.helpers import make_request
from tests.tasks.conftest import FILES, NOTES, TASKS, WAIT_S, Clock, Rpc, body, rpc_on, with_runner

NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
COUNTS_50 = {"imported": FILES, "unchanged": 0, "skipped": 0, "refused": 0, "problems": []}


def start_import(rpc: Rpc, **kw: Any) -> dict[str, Any]:
    return body(
        rpc("tools/call", {"name": "notes_import", "arguments": {"workspaceUri": NOTES}}, **kw)
    )


def import_again(rpc: Rpc) -> dict[str, Any]:
    """A synchronous import (no extension): what the earlier one committed is unchanged."""
    found = start_import(rpc, caps={})
    assert found["resultType"] == "complete"
    structured: dict[str, Any] = found["structuredContent"]
    return structured


@pytest.mark.usefixtures("vault")
def test_an_import_becomes_a_task_whose_result_tasks_get_returns(
    rpc: Rpc, runner: TaskRunner, clock: Clock
) -> None:
    created = start_import(rpc)
    task_id = created["taskId"]
    stamp = iso(clock.now)

    assert created == {
        "resultType": "task",
        "taskId": task_id,
        "status": "working",
        "statusMessage": "Started",
        "createdAt": stamp,
        "lastUpdatedAt": stamp,
        "ttlMs": 3_600_000,
        "pollIntervalMs": 1000,
    }
    assert len(task_id) >= 43  # 32 random bytes
    assert body(rpc("tasks/get", {"taskId": task_id}))["status"] in ("working", "completed")
    assert runner.join(task_id, WAIT_S)

    done = body(rpc("tasks/get", {"taskId": task_id}))

    assert done == {
        "resultType": "complete",
        "taskId": task_id,
        "status": "completed",
        "statusMessage": "Completed",
        "createdAt": stamp,
        "lastUpdatedAt": stamp,
        "ttlMs": 3_600_000,
        "pollIntervalMs": 1000,
        "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": json.dumps(COUNTS_50, separators=(",", ":"))}],
            "isError": False,
            "structuredContent": COUNTS_50,
        },
    }
    assert import_again(rpc)["unchanged"] == FILES


@pytest.mark.usefixtures("vault")
def test_without_the_extension_the_import_is_an_ordinary_call(rpc: Rpc) -> None:
    assert import_again(rpc) == {**COUNTS_50}


@pytest.mark.usefixtures("vault")
def test_a_cancel_mid_way_stops_at_a_file_boundary_and_reports_what_was_committed(
    rpc: Rpc, runner: TaskRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancellation arrives (through the protocol, from the worker thread, between two
    transactions) right after the first batch committed: the import stops there."""
    task_ids: list[str] = []
    known = threading.Event()
    acks: list[dict[str, Any]] = []
    apply = importer._apply

    def apply_then_cancel(*args: Any, **kw: Any) -> None:
        apply(*args, **kw)
        if not acks:  # once the client has the task's id
            assert known.wait(WAIT_S)
            acks.append(rpc("tasks/cancel", {"taskId": task_ids[0]}))

    monkeypatch.setattr(importer, "_apply", apply_then_cancel)

    task_id = start_import(rpc)["taskId"]
    task_ids.append(task_id)
    known.set()
    assert runner.join(task_id, WAIT_S)

    ended = body(rpc("tasks/get", {"taskId": task_id}))

    assert [body(a) for a in acks] == [{"resultType": "complete"}]
    committed = {**COUNTS_50, "imported": TASK_BATCH}
    assert ended["status"] == "cancelled"
    assert ended["statusMessage"] == (
        "Cancelled; committed before stopping: " + json.dumps(committed, separators=(",", ":"))
    )
    assert "result" not in ended and "error" not in ended
    again = import_again(rpc)
    assert (again["imported"], again["unchanged"]) == (FILES - TASK_BATCH, TASK_BATCH)


@pytest.mark.usefixtures("vault")
def test_a_cancel_through_another_instance_reaches_the_task_through_the_database(
    settings: Settings,
    task_services: Services,
    rpc: Rpc,
    runner: TaskRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Instance B has its own runner (no event for the task): only the row's flag tells A."""
    other = TaskRunner(task_services)
    rpc_b = rpc_on(create_server(settings, task_services, with_runner(task_services, other)))
    monkeypatch.setattr(runner_module, "CANCEL_CHECK_EVERY_S", 0.0)
    monkeypatch.setattr(runner_module, "PROGRESS_EVERY_S", 0.0)
    task_ids: list[str] = []
    known = threading.Event()
    seen: list[dict[str, Any]] = []
    apply = importer._apply

    def apply_then_cancel_elsewhere(*args: Any, **kw: Any) -> None:
        apply(*args, **kw)
        if not seen:
            assert known.wait(WAIT_S)
            seen.append(body(rpc_b("tasks/get", {"taskId": task_ids[0]})))
            seen.append(body(rpc_b("tasks/cancel", {"taskId": task_ids[0]})))

    monkeypatch.setattr(importer, "_apply", apply_then_cancel_elsewhere)
    task_ids.append(start_import(rpc)["taskId"])
    known.set()
    assert runner.join(task_ids[0], WAIT_S)

    assert seen[0]["status"] == "working"
    assert seen[0]["statusMessage"] == f"{TASK_BATCH} of {FILES} files read"
    assert seen[1] == {"resultType": "complete"}
    assert body(rpc_b("tasks/get", {"taskId": task_ids[0]}))["status"] == "cancelled"
    assert import_again(rpc)["unchanged"] == TASK_BATCH


@pytest.mark.usefixtures("vault")
def test_another_principals_task_is_answered_as_an_unknown_id(rpc: Rpc, runner: TaskRunner) -> None:
    task_id = start_import(rpc)["taskId"]
    assert runner.join(task_id, WAIT_S)

    as_bob = rpc("tasks/get", {"taskId": task_id}, principal="bob")
    unknown = rpc("tasks/get", {"taskId": "x" * 43})
    cancel_bob = rpc("tasks/cancel", {"taskId": task_id}, principal="bob")
    cancel_unknown = rpc("tasks/cancel", {"taskId": "x" * 43})
    update_bob = rpc("tasks/update", {"taskId": task_id, "inputResponses": {}}, principal="bob")

    assert as_bob["error"] == unknown["error"] == NOT_FOUND
    assert (
        cancel_bob["error"]
        == cancel_unknown["error"]
        == {
            "code": -32602,
            "message": "Failed to cancel task: Task not found",
        }
    )
    assert update_bob["error"] == {
        "code": -32602,
        "message": "Failed to update task: Task not found",
    }
    assert body(rpc("tasks/get", {"taskId": task_id}))["status"] == "completed"


@pytest.mark.usefixtures("vault")
def test_an_expired_task_is_not_found_and_the_sweep_deletes_it(
    rpc: Rpc, runner: TaskRunner, clock: Clock
) -> None:
    task_id = start_import(rpc)["taskId"]
    assert runner.join(task_id, WAIT_S)
    clock.advance(timedelta(hours=1, seconds=1))

    assert rpc("tasks/get", {"taskId": task_id})["error"] == NOT_FOUND
    assert rpc("tasks/cancel", {"taskId": task_id})["error"]["code"] == -32602
    assert runner.repo.sweep() == 1
    assert runner.repo.sweep() == 0
    clock.advance(timedelta(hours=-2))  # the row is gone, not only hidden
    assert rpc("tasks/get", {"taskId": task_id})["error"] == NOT_FOUND


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel", "tasks/update"])
def test_the_task_methods_refuse_a_request_without_the_extension(rpc: Rpc, method: str) -> None:
    reply = rpc(method, {"taskId": "t", "inputResponses": {}}, caps={})

    assert reply["error"] == {
        "code": -32021,
        "message": "Missing required client capability: the io.modelcontextprotocol/tasks "
        "extension",
        "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    }


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "Invalid params: taskId must be a non-empty string"),
        ({"taskId": 7}, "Invalid params: taskId must be a non-empty string"),
        ({"taskId": ""}, "Invalid params: taskId must be a non-empty string"),
        ({"taskId": "t" * 300}, "Failed to retrieve task: Task not found"),
    ],
)
def test_tasks_get_with_a_bad_task_id_is_invalid_params(
    rpc: Rpc, params: dict[str, Any], message: str
) -> None:
    assert rpc("tasks/get", params)["error"] == {"code": -32602, "message": message}


@pytest.mark.usefixtures("vault")
def test_tasks_update_acknowledges_and_ignores_responses_to_keys_not_outstanding(
    rpc: Rpc, runner: TaskRunner
) -> None:
    task_id = start_import(rpc)["taskId"]
    assert runner.join(task_id, WAIT_S)
    answer = {"never-asked": {"action": "accept", "content": {}}}

    acked = rpc("tasks/update", {"taskId": task_id, "inputResponses": answer})
    malformed = rpc("tasks/update", {"taskId": task_id, "inputResponses": ["no"]})
    missing = rpc("tasks/update", {"taskId": task_id})

    assert body(acked) == {"resultType": "complete"}
    for reply in (malformed, missing):
        assert reply["error"] == {
            "code": -32602,
            "message": "Invalid params: inputResponses must be an object of objects",
        }
    assert body(rpc("tasks/get", {"taskId": task_id}))["status"] == "completed"


def test_a_refused_workspace_answers_the_call_itself_and_creates_no_task(rpc: Rpc) -> None:
    reply = rpc("tools/call", {"name": "notes_import", "arguments": {"workspaceUri": NOTES}})

    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("Workspace is not available to this principal")


def test_a_workspace_without_a_folder_is_a_tool_error_not_a_task(rpc: Rpc, grant: Any) -> None:
    grant("alice", NOTES)

    result = start_import(rpc)

    assert result["resultType"] == "complete"
    assert result["isError"] is True


def test_a_tool_that_does_not_allow_tasks_answers_as_usual_with_the_extension(
    rpc: Rpc, grant: Any
) -> None:
    grant("alice", NOTES)

    reply = rpc(
        "tools/call", {"name": "notes_search", "arguments": {"workspaceUri": NOTES, "query": "x"}}
    )

    assert body(reply)["resultType"] == "complete"


def test_discover_declares_the_extension(rpc: Rpc) -> None:
    extensions = body(rpc("server/discover"))["capabilities"]["extensions"]

    assert extensions["io.modelcontextprotocol/tasks"] == {}


class Fails(Tool):
    """A tool allowing tasks whose call fails the way its argument says."""

    name = "test_fails"
    title = description = "Fails"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"how": {"type": "string"}},
        "required": ["how"],
    }
    tool_annotations = tool_hints("Fails", read_only=True)
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        ctx.report_progress(1, 2, "half way")
        if args["how"] == "protocol":
            raise InvalidParams("Invalid params: nothing to do")
        if args["how"] == "tool":
            raise ToolFailure("the tool could not")
        raise RuntimeError("/secret/path exploded")


@pytest.fixture
def failing(settings: Settings, task_services: Services, runner: TaskRunner) -> Rpc:
    extra = Extension(name="failing", tools=[Fails(task_services)])
    return rpc_on(create_server(settings, task_services, with_runner(task_services, runner, extra)))


@pytest.mark.parametrize(
    ("how", "status", "outcome"),
    [
        (
            "protocol",
            "failed",
            {"error": {"code": -32602, "message": "Invalid params: nothing to do"}},
        ),
        ("crash", "failed", {"error": {"code": -32603, "message": "Internal error"}}),
        (
            "tool",
            "completed",
            {
                "result": {
                    "resultType": "complete",
                    "content": [{"type": "text", "text": "the tool could not"}],
                    "isError": True,
                }
            },
        ),
    ],
)
def test_a_json_rpc_error_fails_the_task_and_a_tool_error_completes_it(
    failing: Rpc, runner: TaskRunner, how: str, status: str, outcome: dict[str, Any]
) -> None:
    task_id = body(failing("tools/call", {"name": "test_fails", "arguments": {"how": how}}))[
        "taskId"
    ]
    assert runner.join(task_id, WAIT_S)

    ended = body(failing("tasks/get", {"taskId": task_id}))

    assert ended["status"] == status
    assert {k: ended[k] for k in outcome} == outcome
    assert "/secret" not in json.dumps(ended)


def test_invalid_arguments_are_refused_before_any_task(failing: Rpc) -> None:
    reply = failing("tools/call", {"name": "test_fails", "arguments": {}})

    assert reply["error"]["code"] == -32602


class NeedsTask(Fails):
    name = "test_needs_task"
    task_support = "required"


@pytest.fixture
def requiring(settings: Settings, task_services: Services, runner: TaskRunner) -> Rpc:
    extra = Extension(name="requiring", tools=[NeedsTask(task_services)])
    return rpc_on(create_server(settings, task_services, with_runner(task_services, runner, extra)))


def test_a_tool_that_requires_tasks_is_refused_without_the_extension(
    requiring: Rpc, runner: TaskRunner
) -> None:
    call = {"name": "test_needs_task", "arguments": {"how": "tool"}}

    refused = requiring("tools/call", call, caps={})
    created = body(requiring("tools/call", call))

    assert refused["error"] == {
        "code": -32021,
        "message": "Missing required client capability: the io.modelcontextprotocol/tasks "
        "extension",
        "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    }
    assert created["resultType"] == "task"
    assert runner.join(created["taskId"], WAIT_S)


@pytest.mark.usefixtures("vault")
def test_a_task_sends_nothing_to_the_stream_of_the_request_that_created_it(
    task_server: Any, runner: TaskRunner
) -> None:
    """Progress and log messages of the work go to the task's row, never to the request's
    stream, which was answered when the task was created."""
    sent: list[bytes] = []
    request = make_request(
        "tools/call", {"name": "notes_import", "arguments": {"workspaceUri": NOTES}}, caps=TASKS
    )
    request["params"]["_meta"]["progressToken"] = "p"
    request["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"

    raw = task_server.handle_raw(json.dumps(request), "alice", sent.append)
    assert raw is not None
    task_id = json.loads(raw)["result"]["taskId"]
    assert runner.join(task_id, WAIT_S)

    assert sent == []
