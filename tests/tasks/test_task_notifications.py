"""`notifications/tasks` on `subscriptions/listen` (`notifications.taskIds`), in process through
the composed server's listen method: the acknowledgement names the principal's own live tasks,
each is sent as `tasks/get` would answer it, then on every status change until it ends; another
principal's id is never acknowledged nor delivered; without the Tasks extension, -32021."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.errors import InvalidParams, MissingCapability
from notes_server.features.extension import LiveStream
from notes_server.features.tasks.runner import TaskRunner
from notes_server.features.tasks.watch import MAX_TASK_IDS
from notes_server.protocol.server import McpServer
from notes_server.tools.base import CallContext
from notes_server.tools.services import Services
from tests.helpers import make_request
from tests.tasks.conftest import NOTES, TASKS, WAIT_S, Rpc, body
from tests.transports.subscription_support import insert

FORM_AND_TASKS = {"elicitation": {"form": {}}, **TASKS}
KEY = "delete_choice"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Stream:
    """A listen read the way a transport reads it: woken, then drained."""

    def __init__(self, server: McpServer, principal: str, task_ids: Any, caps: Any = TASKS):
        method = server.streams["subscriptions/listen"]
        ctx = CallContext(principal, caps, f"listen-{principal}")
        self.live: LiveStream = method.open(ctx, {"notifications": {"taskIds": task_ids}})
        self.woken = threading.Event()
        self.live.attach(self.woken.set)
        self.seen: list[dict[str, Any]] = []

    def until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        while not any(done(m) for m in self.seen):
            assert self.woken.wait(WAIT_S), self.seen
            self.woken.clear()
            messages, _ = self.live.drain()
            self.seen.extend(json.loads(m) for m in messages)
        return self.seen

    def pending(self) -> list[bytes]:
        messages, _ = self.live.drain()
        return messages


def status(wanted: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["method"] == "notifications/tasks" and m["params"]["status"] == wanted


@pytest.fixture
def note_id(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("alice", NOTES)
    return insert(migrated_engine, NOTES, "plan.md").id


def start_delete(rpc: Rpc, runner: TaskRunner) -> str:
    params = {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "plan"}}
    task_id: str = body(rpc("tools/call", params, caps=FORM_AND_TASKS))["taskId"]
    assert runner.wait_for_input(task_id, WAIT_S)
    return task_id


def test_a_listen_hears_its_task_ask_then_complete(
    task_server: McpServer, rpc: Rpc, runner: TaskRunner, note_id: str
) -> None:
    task_id = start_delete(rpc, runner)
    stream = Stream(task_server, "alice", [task_id, task_id])

    asked = stream.until(status("input_required"))
    polled = body(rpc("tasks/get", {"taskId": task_id}))
    rpc("tasks/update", {"taskId": task_id, "inputResponses": {KEY: {"action": "decline"}}})
    assert runner.join(task_id, WAIT_S)
    seen = stream.until(status("completed"))
    final = body(rpc("tasks/get", {"taskId": task_id}))

    assert asked[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"taskIds": [task_id]},
            "_meta": {SUBSCRIPTION_ID: "listen-alice"},
        },
    }
    first = asked[1]["params"]
    assert first.pop("_meta") == {SUBSCRIPTION_ID: "listen-alice"}
    polled.pop("resultType")
    assert first == polled
    last = seen[-1]["params"]
    last.pop("_meta")
    final.pop("resultType")
    assert last == final
    assert final["result"]["structuredContent"]["outcome"] == "declined"
    assert [m["params"]["status"] for m in seen[1:]].count("completed") == 1
    stream.live.close()


def test_another_principals_task_is_never_acknowledged_nor_delivered(
    task_server: McpServer, rpc: Rpc, runner: TaskRunner, note_id: str
) -> None:
    task_id = start_delete(rpc, runner)
    bobs = Stream(task_server, "bob", [task_id, "no-such-task"])
    alices = Stream(task_server, "alice", [task_id])

    rpc("tasks/cancel", {"taskId": task_id})
    assert runner.join(task_id, WAIT_S)
    alices.until(status("cancelled"))
    (ack,) = bobs.until(lambda m: True)

    assert ack["params"]["notifications"] == {"taskIds": []}
    assert bobs.pending() == []
    bobs.live.close()
    alices.live.close()


def test_task_ids_without_the_tasks_extension_are_refused(task_server: McpServer) -> None:
    with pytest.raises(MissingCapability) as refused:
        Stream(task_server, "alice", ["some-task"], caps={})

    assert refused.value.data == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }


@pytest.mark.parametrize(
    ("task_ids", "message"),
    [
        ("one", "Invalid params: notifications.taskIds must be a list"),
        ([7], "Invalid params: notifications.taskIds must be non-empty strings"),
        ([""], "Invalid params: notifications.taskIds must be non-empty strings"),
        (
            [f"t{n}" for n in range(MAX_TASK_IDS + 1)],
            f"Too many task subscriptions: at most {MAX_TASK_IDS} task ids per listen",
        ),
    ],
)
def test_malformed_task_ids_are_invalid_params(
    task_server: McpServer, task_ids: Any, message: str
) -> None:
    with pytest.raises(InvalidParams) as refused:
        Stream(task_server, "alice", task_ids)

    assert refused.value.message == message


def test_over_http_the_listen_stream_carries_the_tasks_notifications(
    settings: Settings, migrated_engine: Engine, rpc: Rpc, runner: TaskRunner, note_id: str
) -> None:
    """The listen's SSE response (the ASGI app driven by hand, as the subscription tests do):
    the acknowledgement, the task asking, then the task completed after the answer."""
    from tests.transports.test_subscriptions_http import Exchange

    app = create_http_app(
        settings, HttpSettings(auth="none"), Services(settings, engine=migrated_engine)
    )
    task_id = start_delete(rpc, runner)
    message = make_request(
        "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, caps=TASKS, id="h1"
    )

    async def scenario() -> list[dict[str, Any]]:
        exchange = Exchange(app, message)
        exchange.start()
        assert (await exchange.next())["status"] == 200
        seen = [await exchange.event(), await exchange.event()]
        answer = {KEY: {"action": "accept", "content": {"note_id": note_id, "confirm": True}}}
        await asyncio.to_thread(rpc, "tasks/update", {"taskId": task_id, "inputResponses": answer})
        while seen[-1]["params"].get("status") != "completed":
            seen.append(await exchange.event())
        await exchange.disconnect()
        return seen

    seen = asyncio.run(scenario())

    assert seen[0]["params"]["notifications"] == {"taskIds": [task_id]}
    assert seen[1]["method"] == "notifications/tasks"
    assert seen[1]["params"]["status"] == "input_required"
    assert seen[-1]["params"]["result"]["structuredContent"]["deleted"] is True
    assert seen[-1]["params"]["_meta"] == {SUBSCRIPTION_ID: "h1"}
