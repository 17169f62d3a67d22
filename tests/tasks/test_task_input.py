"""Tasks that ask for input while they run (`input_required`): `notes_delete` run as a task asks
its confirmation through `tasks/get`'s `inputRequests` and is answered by `tasks/update`, at this
or another instance, through the same sealed state and the same one transaction with the nonce
claim as the multi round-trip call; cancel while waiting; other principals; the conformance
fixtures `multi_input` (partial answers) and `test_tool_with_task` (rounds before the task)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from notes_server.app import create_server, tools_module_extension
from notes_server.config import Settings
from notes_server.features.tasks.runner import ABANDONED, TaskRunner
from notes_server.protocol.server import McpServer
from notes_server.store.engine import read_tx
from notes_server.store.models import audit_table, nonces_table, notes_table
from notes_server.tools.services import Services
from tests.tasks.conftest import NOTES, TASKS, WAIT_S, Clock, Rpc, body, rpc_on, with_runner
from tests.transports.subscription_support import insert, touch

FORM_AND_TASKS = {"elicitation": {"form": {}}, **TASKS}
KEY = "delete_choice"


def accept(note_id: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"note_id": note_id, "confirm": True}}


def counts(engine: Engine) -> tuple[int, int, int]:
    """(live notes, consumed nonces, audit rows)."""
    with read_tx(engine) as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (notes_table, nonces_table, audit_table)
        )


@pytest.fixture
def note_id(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("alice", NOTES)
    return insert(migrated_engine, NOTES, "plan.md").id


def start_delete(rpc: Rpc, title: str = "plan") -> dict[str, Any]:
    params = {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": title}}
    return body(rpc("tools/call", params, caps=FORM_AND_TASKS))


def asked(rpc: Rpc, runner: TaskRunner, task_id: str) -> dict[str, Any]:
    assert runner.wait_for_input(task_id, WAIT_S)
    return body(rpc("tasks/get", {"taskId": task_id}))


def update(rpc: Rpc, task_id: str, responses: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return rpc("tasks/update", {"taskId": task_id, "inputResponses": responses}, **kw)


def ended(rpc: Rpc, runner: TaskRunner, task_id: str) -> dict[str, Any]:
    """The task as `tasks/get` answers once its work has ended."""
    assert runner.join(task_id, WAIT_S)
    return body(rpc("tasks/get", {"taskId": task_id}))


def test_a_delete_as_a_task_asks_the_same_form_and_deletes_once_answered(
    rpc: Rpc, runner: TaskRunner, migrated_engine: Engine, note_id: str
) -> None:
    params = {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "plan"}}
    ordinary = body(rpc("tools/call", params, caps={"elicitation": {"form": {}}}))
    created = start_delete(rpc)
    task_id = created["taskId"]

    waiting = asked(rpc, runner, task_id)
    acked = update(rpc, task_id, {KEY: accept(note_id)})
    done = ended(rpc, runner, task_id)

    assert created["resultType"] == "task" and "requestState" not in created
    assert waiting["status"] == "input_required"
    assert waiting["statusMessage"] == "Waiting for input"
    assert waiting["inputRequests"] == ordinary["inputRequests"]
    assert list(waiting["inputRequests"]) == [KEY]
    assert body(acked) == {"resultType": "complete"}
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {
        "deleted": True,
        "outcome": "deleted",
        "noteId": note_id,
        "title": "plan.md",
        "uri": f"{NOTES}/plan.md",
    }
    assert counts(migrated_engine) == (0, 1, 1)  # gone; one nonce claimed, one audit row


def test_another_instance_takes_the_answer_and_the_task_completes(
    settings: Settings,
    migrated_engine: Engine,
    clock: Clock,
    rpc: Rpc,
    runner: TaskRunner,
    note_id: str,
) -> None:
    services = Services(settings, engine=migrated_engine, clock=clock)
    other_runner = TaskRunner(services)
    other: McpServer = create_server(settings, services, with_runner(services, other_runner))
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)

    acked = update(rpc_on(other), task_id, {KEY: accept(note_id)})
    assert runner.join(task_id, WAIT_S)  # the row told the first instance's task
    seen_there = body(rpc_on(other)("tasks/get", {"taskId": task_id}))

    assert body(acked) == {"resultType": "complete"}
    assert seen_there["status"] == "completed"
    assert seen_there["result"]["structuredContent"]["deleted"] is True
    assert counts(migrated_engine) == (0, 1, 1)


def test_a_decline_through_tasks_update_deletes_nothing(
    rpc: Rpc, runner: TaskRunner, migrated_engine: Engine, note_id: str
) -> None:
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)

    update(rpc, task_id, {KEY: {"action": "decline"}})
    done = ended(rpc, runner, task_id)

    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"deleted": False, "outcome": "declined"}
    assert counts(migrated_engine) == (1, 1, 1)  # the decline claims its nonce and is audited


def test_a_note_changed_while_the_task_waited_is_not_deleted(
    rpc: Rpc, runner: TaskRunner, migrated_engine: Engine, note_id: str
) -> None:
    """The sealed version decides, as on the multi round-trip path."""
    with read_tx(migrated_engine) as conn:
        from notes_server.store import notes

        note = notes.get_note(conn, NOTES, note_id)
    assert note is not None
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)
    touch(migrated_engine, note)

    update(rpc, task_id, {KEY: accept(note_id)})
    done = ended(rpc, runner, task_id)

    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert "changed after the confirmation was requested" in done["result"]["content"][0]["text"]
    assert counts(migrated_engine) == (1, 0, 0)


def test_cancelling_a_task_waiting_for_input_ends_it_and_deletes_nothing(
    rpc: Rpc, runner: TaskRunner, migrated_engine: Engine, note_id: str
) -> None:
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)

    cancelled = rpc("tasks/cancel", {"taskId": task_id})
    assert runner.join(task_id, WAIT_S)
    late = update(rpc, task_id, {KEY: accept(note_id)})
    done = body(rpc("tasks/get", {"taskId": task_id}))

    assert body(cancelled) == {"resultType": "complete"}
    assert done["status"] == "cancelled"
    assert done["statusMessage"] == ABANDONED
    assert "inputRequests" not in done
    assert body(late) == {"resultType": "complete"}  # acknowledged, nothing outstanding
    assert counts(migrated_engine) == (1, 0, 0)


def test_another_principal_can_neither_see_nor_answer_the_question(
    rpc: Rpc, runner: TaskRunner, migrated_engine: Engine, note_id: str
) -> None:
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)

    seen = rpc("tasks/get", {"taskId": task_id}, principal="bob")
    answered = update(rpc, task_id, {KEY: accept(note_id)}, principal="bob")
    still = body(rpc("tasks/get", {"taskId": task_id}))
    rpc("tasks/cancel", {"taskId": task_id})

    assert seen["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert answered["error"] == {"code": -32602, "message": "Failed to update task: Task not found"}
    assert still["status"] == "input_required"
    assert runner.join(task_id, WAIT_S)
    assert counts(migrated_engine) == (1, 0, 0)


def test_responses_to_keys_not_outstanding_are_ignored(
    rpc: Rpc, runner: TaskRunner, note_id: str
) -> None:
    task_id = start_delete(rpc)["taskId"]
    asked(rpc, runner, task_id)

    acked = update(rpc, task_id, {"never-asked": accept(note_id)})
    still = body(rpc("tasks/get", {"taskId": task_id}))
    rpc("tasks/cancel", {"taskId": task_id})

    assert body(acked) == {"resultType": "complete"}
    assert still["status"] == "input_required" and list(still["inputRequests"]) == [KEY]
    assert runner.join(task_id, WAIT_S)


def test_a_forged_request_state_is_refused_at_once_and_creates_no_task(
    rpc: Rpc, note_id: str
) -> None:
    params = {
        "name": "notes_delete",
        "arguments": {"workspaceUri": NOTES, "title": "plan"},
        "inputResponses": {KEY: accept(note_id)},
        "requestState": "forged",
    }

    reply = rpc("tools/call", params, caps=FORM_AND_TASKS)

    assert reply["error"] == {"code": -32602, "message": "Invalid or expired requestState"}


def test_without_form_elicitation_a_delete_task_is_refused_at_once(rpc: Rpc, note_id: str) -> None:
    params = {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "plan"}}

    reply = rpc("tools/call", params, caps=TASKS)

    assert reply["error"]["code"] == -32021


@pytest.fixture
def fixture_rpc(
    settings: Settings, migrated_engine: Engine, clock: Clock, runner: TaskRunner
) -> Iterator[Rpc]:
    """The conformance task fixtures on the test's runner."""
    services = Services(settings, engine=migrated_engine, clock=clock)
    fixtures = tools_module_extension("tests.conformance.fixture_tasks", services)
    yield rpc_on(create_server(settings, services, with_runner(services, runner, fixtures)))


def test_partial_answers_keep_the_task_waiting_for_the_rest(
    fixture_rpc: Rpc, runner: TaskRunner
) -> None:
    created = body(fixture_rpc("tools/call", {"name": "multi_input", "arguments": {}}))
    task_id = created["taskId"]
    assert runner.wait_for_input(task_id, WAIT_S)
    both = body(fixture_rpc("tasks/get", {"taskId": task_id}))

    update(fixture_rpc, task_id, {"name": {"action": "accept", "content": {"name": "Ada"}}})
    one_left = body(fixture_rpc("tasks/get", {"taskId": task_id}))
    update(fixture_rpc, task_id, {"confirm": {"action": "accept", "content": {"confirm": True}}})
    assert runner.join(task_id, WAIT_S)
    done = body(fixture_rpc("tasks/get", {"taskId": task_id}))

    assert sorted(both["inputRequests"]) == ["confirm", "name"]
    assert one_left["status"] == "input_required"
    assert list(one_left["inputRequests"]) == ["confirm"]
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {
        "answers": {"name": {"name": "Ada"}, "confirm": {"confirm": True}}
    }


def test_rounds_before_the_task_then_the_task_on_the_last_round(
    fixture_rpc: Rpc, runner: TaskRunner
) -> None:
    caps = {"elicitation": {}, **TASKS}
    first = body(
        fixture_rpc("tools/call", {"name": "test_tool_with_task", "arguments": {}}, caps=caps)
    )
    (key,) = first["inputRequests"]
    second = body(
        fixture_rpc(
            "tools/call",
            {
                "name": "test_tool_with_task",
                "arguments": {},
                "inputResponses": {key: {"action": "accept", "content": {"name": "Alice"}}},
                "requestState": first["requestState"],
            },
            caps=caps,
        )
    )
    assert runner.join(second["taskId"], WAIT_S)
    done = body(fixture_rpc("tasks/get", {"taskId": second["taskId"]}))

    assert first["resultType"] == "input_required" and "taskId" not in first
    assert second["resultType"] == "task"
    assert "requestState" not in second and "inputRequests" not in second
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice!"}]


def test_a_task_waiting_for_input_leaves_room_for_another_task(
    settings: Settings,
    migrated_engine: Engine,
    clock: Clock,
    grant: Callable[..., str],
) -> None:
    """With room for one working task, a second delete still becomes a task while the first
    waits for its answer (a waiting task is a blocked thread, not work)."""
    grant("alice", NOTES)
    insert(migrated_engine, NOTES, "a.md")
    insert(migrated_engine, NOTES, "b.md")
    services = Services(settings, engine=migrated_engine, clock=clock)
    narrow = TaskRunner(services, max_running=1)
    rpc = rpc_on(create_server(settings, services, with_runner(services, narrow)))
    started: list[dict[str, Any]] = []
    try:
        started.append(start_delete(rpc, "a.md"))
        assert narrow.wait_for_input(started[0]["taskId"], WAIT_S)
        started.append(start_delete(rpc, "b.md"))

        assert [created["resultType"] for created in started] == ["task", "task"]
    finally:
        for created in started:
            if "taskId" in created:
                rpc("tasks/cancel", {"taskId": created["taskId"]})
        narrow.join_all(WAIT_S)
