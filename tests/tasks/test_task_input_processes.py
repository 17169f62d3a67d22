"""Two real `serve` processes (stdio) on one database: a `notes_delete` task runs on the first;
the second's listen (`taskIds`) hears it ask and end, and the second answers it with
`tasks/update`: the question, the answer and the notifications all cross through the rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text

from notes_server.security.keyring import KeyRing
from tests.helpers import ServerProcess, make_request
from tests.tasks.conftest import NOTES, TASKS
from tests.transports.subscription_support import insert

FORM_AND_TASKS = {"elicitation": {"form": {}}, **TASKS}
KEY = "delete_choice"


def next_task_status(process: ServerProcess, wanted: str) -> dict[str, Any]:
    """Read the listen's notifications until one says `wanted` (the order is the task's)."""
    while True:
        message = process.read()
        assert message["method"] == "notifications/tasks", message
        if message["params"]["status"] == wanted:
            params: dict[str, Any] = message["params"]
            return params


def test_a_task_on_one_process_is_heard_and_answered_on_another(
    migrated_engine: Engine,
    spawn_server: Callable[..., ServerProcess],
    grant: Callable[..., str],
) -> None:
    grant("alice", NOTES)
    note = insert(migrated_engine, NOTES, "plan.md")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    runner, other = spawn_server(env=env), spawn_server(env=env)
    call = {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "plan"}}
    created = runner.request("tools/call", call, caps=FORM_AND_TASKS)["result"]
    task_id = created["taskId"]

    other.send(
        make_request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, caps=TASKS)
    )
    ack = other.read()
    asked = next_task_status(other, "input_required")
    answer = {KEY: {"action": "accept", "content": {"note_id": note.id, "confirm": True}}}
    other.send(
        make_request(
            "tasks/update", {"taskId": task_id, "inputResponses": answer}, caps=TASKS, id=2
        )
    )
    acked = other.read()
    done = next_task_status(other, "completed")
    polled = runner.request("tasks/get", {"taskId": task_id}, caps=TASKS, id=3)["result"]

    assert created["resultType"] == "task"
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert list(asked["inputRequests"]) == [KEY]
    assert acked["id"] == 2 and acked["result"]["resultType"] == "complete"
    assert done["result"]["structuredContent"]["deleted"] is True
    assert polled["status"] == "completed"
    assert polled["result"] == done["result"]
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
