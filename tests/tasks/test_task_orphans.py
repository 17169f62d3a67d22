"""A task whose process stopped (killed, crashed, its machine gone) does not stay `working`
until it expires: once nothing has said it is alive for the orphan window, the next
`tasks/get`, from any instance, ends it `failed` and says why. A task whose process keeps
beating stays `working` however long it runs."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from notes_server.app import create_server
from notes_server.config import Settings
from notes_server.features.extension import Extension
from notes_server.features.tasks.runner import ORPHAN_AFTER, TaskRunner
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.services import Services
from tests.tasks.conftest import WAIT_S, Clock, Rpc, body, rpc_on, with_runner

ORPHANED = (
    "The server process running this task stopped before the task ended; what it committed "
    "before then stays committed"
)


class Waits(Tool):
    """A tool allowing tasks that runs until the test lets it finish."""

    name = "test_waits"
    title = description = "Waits"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    tool_annotations = tool_hints("Waits", read_only=True)
    task_support = "optional"
    release = threading.Event()

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        assert self.release.wait(WAIT_S)
        return ToolResult({"done": True})


@pytest.fixture
def waiting(settings: Settings, task_services: Services, runner: TaskRunner) -> Rpc:
    Waits.release = threading.Event()
    extra = Extension(name="waiting", tools=[Waits(task_services)])
    return rpc_on(create_server(settings, task_services, with_runner(task_services, runner, extra)))


def orphan(runner: TaskRunner) -> str:
    """A working task as a process that died would leave it: a row no thread runs."""
    return runner.repo.create("alice", "test_waits", timedelta(hours=1), "Started").id


def test_a_task_silent_past_the_window_ends_failed_and_says_why(
    waiting: Rpc, runner: TaskRunner, clock: Clock
) -> None:
    task_id = orphan(runner)
    clock.advance(ORPHAN_AFTER + timedelta(seconds=1))

    first = body(waiting("tasks/get", {"taskId": task_id}))
    again = body(waiting("tasks/get", {"taskId": task_id}))

    assert first["status"] == "failed"
    assert first["statusMessage"] == ORPHANED
    assert first["error"] == {"code": -32603, "message": "Internal error: " + ORPHANED.lower()}
    assert again == first


def test_within_the_window_a_silent_task_is_still_working(
    waiting: Rpc, runner: TaskRunner, clock: Clock
) -> None:
    task_id = orphan(runner)
    clock.advance(ORPHAN_AFTER - timedelta(seconds=1))

    assert body(waiting("tasks/get", {"taskId": task_id}))["status"] == "working"


def test_another_instance_fails_the_orphan_of_a_process_that_stopped(
    settings: Settings, task_services: Services, runner: TaskRunner, clock: Clock
) -> None:
    """The instance that answers is not the one that created the task."""
    task_id = orphan(runner)
    other = TaskRunner(task_services)
    rpc = rpc_on(create_server(settings, task_services, with_runner(task_services, other)))
    clock.advance(ORPHAN_AFTER + timedelta(seconds=1))

    assert body(rpc("tasks/get", {"taskId": task_id}))["status"] == "failed"


def test_a_long_task_whose_process_beats_stays_working_then_completes(
    waiting: Rpc, runner: TaskRunner, clock: Clock, task_services: Services, settings: Settings
) -> None:
    created = body(waiting("tools/call", {"name": "test_waits", "arguments": {}}))
    task_id = created["taskId"]
    other = rpc_on(
        create_server(
            settings, task_services, with_runner(task_services, TaskRunner(task_services))
        )
    )
    for _ in range(3):  # three windows long, beating all along
        clock.advance(ORPHAN_AFTER - timedelta(seconds=1))
        assert runner.beat() == 1
    clock.advance(timedelta(seconds=2))

    assert body(other("tasks/get", {"taskId": task_id}))["status"] == "working"
    Waits.release.set()
    assert runner.join(task_id, WAIT_S)
    done = body(other("tasks/get", {"taskId": task_id}))
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"done": True}


def test_a_task_that_ended_is_never_rewritten_as_an_orphan(
    waiting: Rpc, runner: TaskRunner, clock: Clock
) -> None:
    created = body(waiting("tools/call", {"name": "test_waits", "arguments": {}}))
    Waits.release.set()
    assert runner.join(created["taskId"], WAIT_S)
    clock.advance(ORPHAN_AFTER * 2)

    assert body(waiting("tasks/get", {"taskId": created["taskId"]}))["status"] == "completed"
