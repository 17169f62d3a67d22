"""A `--tools-module` with the fixtures the conformance suite's Tasks-extension scenarios name
(`tasks-*`, not scored in the default run): `greet` (never a task), `slow_compute` (a task that
takes `seconds` and settles to `cancelled` when asked), `failing_job` (a tool error; tasks
required), `protocol_error_job` (a JSON-RPC error), `confirm_delete` (a task that asks one
form elicitation while it runs and completes with the answer), `multi_input` (a task that asks
two at once) and `test_tool_with_task` (tasks required: a multi round-trip round asks for a
name before the task exists, the task starts on the last round and greets it). For targeted
runs; see docs/tasks.md."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from notes_server.errors import InvalidParams, ToolFailure
from notes_server.tools.base import (
    CallContext,
    InputRequired,
    TaskControl,
    TaskWork,
    Tool,
    ToolResult,
    tool_hints,
)

STEP_S = 0.05


class Greet(Tool):
    name = "greet"
    title = description = "Greets"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    tool_annotations = tool_hints("Greets", read_only=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult(None, f"Hello, {args['name']}!")


class SlowCompute(Tool):
    name = "slow_compute"
    title = description = "Computes slowly"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}},
        "required": ["seconds"],
    }
    tool_annotations = tool_hints("Computes slowly", read_only=True)
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return self._compute(args, None)

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork:
        return lambda control: self._compute(args, control)

    @staticmethod
    def _compute(args: dict[str, Any], control: TaskControl | None) -> ToolResult:
        deadline = time.monotonic() + float(args["seconds"])
        while time.monotonic() < deadline:  # the fixture's work is to take this long
            if control is not None and control.is_set():
                break
            time.sleep(STEP_S)
        return ToolResult({"label": args.get("label", ""), "seconds": args["seconds"]})


class FailingJob(Tool):
    name = "failing_job"
    title = description = "Fails as a tool"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Fails as a tool", read_only=True)
    task_support = "required"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        raise ToolFailure("failing_job failed, as it always does")


class ProtocolErrorJob(Tool):
    name = "protocol_error_job"
    title = description = "Fails with a JSON-RPC error"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Fails with a JSON-RPC error", read_only=True)
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        raise InvalidParams("Invalid params: protocol_error_job always fails")


def elicit(message: str, field: str, kind: str) -> dict[str, Any]:
    """A form `elicitation/create` as an input request."""
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def content(responses: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """The accepted content answered for `key`, or None (not answered, or not accepted)."""
    answer = (responses or {}).get(key)
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return None
    found = answer.get("content")
    return found if isinstance(found, dict) else {}


class AskingTool(Tool):
    """A fixture that asks `questions` (by key) and answers once every key is answered. As a
    task it asks through the task (`Tool.answering`); its state is sealed like any other."""

    questions: ClassVar[dict[str, dict[str, Any]]]
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        if ctx.request_state is not None:
            self.services.states.verify(
                ctx.request_state, principal=ctx.principal, tool=self.name, phases=["ask"],
                arguments={},
            )  # fmt: skip
            answers = {key: content(ctx.input_responses, key) for key in self.questions}
            if all(answer is not None for answer in answers.values()):
                return ToolResult({"answers": answers, **args})
        state = self.services.states.issue(
            principal=ctx.principal, tool=self.name, phase="ask", arguments={}
        )
        return InputRequired(dict(self.questions), state)


class ConfirmDelete(AskingTool):
    name = "confirm_delete"
    title = description = "Asks for a confirmation, then reports it"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"filename": {"type": "string"}},
    }
    tool_annotations = tool_hints("Asks for a confirmation", read_only=True)
    questions: ClassVar[dict[str, dict[str, Any]]] = {
        "confirm": elicit("Delete the file?", "confirm", "boolean")
    }


class MultiInput(AskingTool):
    name = "multi_input"
    title = description = "Asks two questions at once"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Asks two questions at once", read_only=True)
    questions: ClassVar[dict[str, dict[str, Any]]] = {
        "name": elicit("Your name?", "name", "string"),
        "confirm": elicit("Go on?", "confirm", "boolean"),
    }


class ToolWithTask(Tool):
    name = "test_tool_with_task"
    title = description = "Asks for a name, then greets it as a task"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Greets as a task", read_only=True)
    task_support = "required"
    QUESTION = "user_name"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        raise InvalidParams("Invalid params: test_tool_with_task runs only as a task")

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork | InputRequired:
        """The multi round-trip rounds happen before the task (the extension's SHOULD): the
        round without the name asks for it; the round with it starts the task."""
        if ctx.request_state is None:
            state = self.services.states.issue(
                principal=ctx.principal, tool=self.name, phase="name", arguments={}
            )
            return InputRequired({self.QUESTION: elicit("Your name?", "name", "string")}, state)
        self.services.states.verify(
            ctx.request_state, principal=ctx.principal, tool=self.name, phases=["name"],
            arguments={},
        )  # fmt: skip
        answer = content(ctx.input_responses, self.QUESTION)
        name = str((answer or {}).get("name", ""))
        if not name:
            raise InvalidParams("Invalid params: user_name was not answered with a name")
        return lambda control: ToolResult({"user_name": name}, f"Hello, {name}!")


TOOLS = [
    Greet,
    SlowCompute,
    FailingJob,
    ProtocolErrorJob,
    ConfirmDelete,
    MultiInput,
    ToolWithTask,
]
