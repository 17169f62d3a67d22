"""The Tasks extension through the extension seam: `io.modelcontextprotocol/tasks` in
`server/discover`'s `capabilities.extensions`, the `tools/call` hook that turns a call of a
tool allowing it into a task, and `tasks/get`, `tasks/update`, `tasks/cancel`.

A client that does not declare the extension on a request never gets a task (its calls run
as before, progress notifications included) and is refused the three methods with -32021. An
unknown id, an expired one and another principal's are one error (-32602, one message).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from notes_server.capabilities import TASKS_EXTENSION, declares_tasks
from notes_server.errors import InvalidParams
from notes_server.features.extension import Extension
from notes_server.features.tasks.runner import (
    DEFAULT_TTL,
    TaskRunner,
    missing_extension,
    task_wire,
)
from notes_server.tools.base import CallContext
from notes_server.tools.services import Services

MAX_TASK_ID = 256
NOT_FOUND = "Task not found"


def _require_extension(ctx: CallContext) -> None:
    if not declares_tasks(ctx.capabilities):
        raise missing_extension()


def _task_id(params: dict[str, Any]) -> str:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParams("Invalid params: taskId must be a non-empty string")
    if len(task_id) > MAX_TASK_ID:
        raise InvalidParams("Failed to retrieve task: " + NOT_FOUND)
    return task_id


class TaskMethods:
    """The extension's three methods over one runner."""

    def __init__(self, runner: TaskRunner) -> None:
        self.runner = runner

    def get(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        _require_extension(ctx)
        record = self.runner.get(ctx.principal, _task_id(params))
        if record is None:
            raise InvalidParams("Failed to retrieve task: " + NOT_FOUND)
        return {"resultType": "complete", **task_wire(record)}

    def update(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        """Answers to an `input_required` task's outstanding `inputRequests`, stored in its row
        (any instance); responses to keys not outstanding are ignored, as the extension says;
        an unknown task is -32602. The acknowledgement does not wait for the task."""
        _require_extension(ctx)
        task_id = _task_id(params)
        responses = params.get("inputResponses")
        if not isinstance(responses, dict) or not all(
            isinstance(v, dict) for v in responses.values()
        ):
            raise InvalidParams("Invalid params: inputResponses must be an object of objects")
        if not self.runner.answer(ctx.principal, task_id, responses):
            raise InvalidParams("Failed to update task: " + NOT_FOUND)
        return {"resultType": "complete"}

    def cancel(self, ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        _require_extension(ctx)
        if not self.runner.cancel(ctx.principal, _task_id(params)):
            raise InvalidParams("Failed to cancel task: " + NOT_FOUND)
        return {"resultType": "complete"}


def tasks_extension(
    services: Services, ttl: timedelta = DEFAULT_TTL, runner: TaskRunner | None = None
) -> Extension:
    """`runner`: the one to use (tests keep theirs, to wait for its tasks)."""
    runner = runner or TaskRunner(services, ttl)
    methods = TaskMethods(runner)
    return Extension(
        name="tasks",
        extensions={TASKS_EXTENSION: {}},
        methods={
            "tasks/get": methods.get,
            "tasks/update": methods.update,
            "tasks/cancel": methods.cancel,
        },
        tool_call_hook=runner.maybe_start,
    )
