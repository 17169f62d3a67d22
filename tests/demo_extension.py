"""A test extension that uses every contribution of the seam: a tool, a discover `extensions`
entry, a `demo:` resource provider with its own paging, a tool `_meta` that depends on the
request's client capabilities, and an HTTP route."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from notes_server.errors import InvalidParams
from notes_server.features.extension import Extension
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.services import Services

DEMO_ID = "com.example/demo"
DEMO_PAGE = 2


class EchoTool(Tool):
    name = "demo_echo"
    title = "Echo"
    description = "Echoes its text."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    tool_annotations = tool_hints("Echo", read_only=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult({"echo": args["text"], "principal": ctx.principal})


class DemoResources:
    """`demo:0` ... `demo:<count-1>`, two a page, cursors `page-<n>`."""

    def __init__(self, count: int) -> None:
        self.count = count

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        pages = {f"page-{n}": n for n in range(1, self.count)}
        if cursor is not None and cursor not in pages:
            raise InvalidParams("Invalid cursor")
        start = DEMO_PAGE * (pages[cursor] if cursor else 0)
        items = [{"uri": f"demo:{i}", "name": f"demo {i}"} for i in range(start, self.count)]
        more = len(items) > DEMO_PAGE
        after = f"page-{start // DEMO_PAGE + 1}" if more else None
        return items[:DEMO_PAGE], after

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        if uri not in {f"demo:{i}" for i in range(self.count)}:
            raise InvalidParams("Resource not found", {"uri": uri})
        return [{"uri": uri, "mimeType": "text/plain", "text": f"{uri} for {ctx.principal}"}]


def demo_meta(tool: Tool, capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """Only the demo tool, and only for a request whose client declares the demo extension."""
    declared = capabilities.get("extensions")
    if tool.name != EchoTool.name or not isinstance(declared, dict) or DEMO_ID not in declared:
        return None
    return {DEMO_ID: {"view": "demo:0"}}


async def hello(request: Request) -> Response:
    return Response("hello from demo", media_type="text/plain")


def demo_routes() -> Sequence[BaseRoute]:
    return [Route("/demo/hello", hello, methods=["GET"])]


def demo_extension(services: Services, *, resources: int = 5) -> Extension:
    return Extension(
        name="demo",
        extensions={DEMO_ID: {"version": "1"}},
        tools=[EchoTool(services)],
        resource_providers={"demo": DemoResources(resources)},
        tool_meta=demo_meta,
        http_routes=demo_routes,
    )
