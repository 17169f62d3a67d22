"""A `--tools-module` with the fixtures the conformance suite's Tasks-extension scenarios name
(`tasks-*`, not scored in the default run): `greet` (never a task), `slow_compute` (a task that
takes `seconds` and settles to `cancelled` when asked), `failing_job` (a tool error; tasks
required) and `protocol_error_job` (a JSON-RPC error). For targeted runs; see docs/tasks.md."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from notes_server.errors import InvalidParams, ToolFailure
from notes_server.tools.base import CallContext, TaskControl, TaskWork, Tool, ToolResult, tool_hints

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


TOOLS = [Greet, SlowCompute, FailingJob, ProtocolErrorJob]
