"""A `--tools-module` for the stdio task tests: a tool allowing tasks whose call reads a FIFO,
so it cannot finish before the test writes to it (after its client has gone away)."""

from __future__ import annotations

from typing import Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints


class ReadsFifo(Tool):
    name = "test_reads_fifo"
    title = description = "Reads a FIFO"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"fifo": {"type": "string"}},
        "required": ["fifo"],
    }
    tool_annotations = tool_hints("Reads a FIFO", read_only=True)
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        with open(args["fifo"], encoding="utf-8") as fifo:  # blocks until a writer opens it
            return ToolResult({"read": fifo.read()})


TOOLS = [ReadsFifo]
