"""A test-only tool whose result the response encoder cannot serialize (loaded with
`serve --tools-module stdio_faults`): an unexpected exception outside the dispatcher's own
catch-all, to prove a connection survives one."""

from __future__ import annotations

from typing import Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints


class Unencodable(Tool):
    name = "test_unencodable"
    title = "Unencodable"
    description = "Returns a value JSON cannot express."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    tool_annotations = tool_hints("Unencodable", read_only=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult({"values": {1, 2}}, text="a set is not JSON")


TOOLS: list[type[Tool]] = [Unencodable]
