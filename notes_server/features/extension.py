"""What an extension is: one named bundle of contributions the server composes at start.

An extension never reaches into the core: it contributes server capabilities and `extensions`
entries for `server/discover`, tools, prompts, resource providers (one per URI scheme; those
of its schemes whose resources never change may be named by a subscription) and resource
templates (each completing its own variables), a hook that adds `_meta` to tool
descriptors for one request's client capabilities, HTTP routes, JSON-RPC methods of its own
(`tasks/get`...), a hook that may answer a `tools/call` in the tool's stead (a task), and
long-lived methods (`streams`: a request answered by a stream of notifications,
`subscriptions/listen`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from notes_server.features.prompts.base import Prompt
    from notes_server.tools.base import CallContext, Tool
    from notes_server.tools.completion import Completion
    from notes_server.tools.registry import ToolMetaHook, ToolMetaVariant

RouteFactory = Callable[[], "Sequence[BaseRoute]"]
# A JSON-RPC method an extension serves: the request as a CallContext and its params in, the
# result body (without `_meta`) out; McpError for a protocol error.
ExtensionMethod = Callable[["CallContext", dict[str, Any]], dict[str, Any]]
# Called for a validated `tools/call` before the tool runs: a result to answer instead (the
# Tasks extension's CreateTaskResult), or None to run the call as usual.
ToolCallHook = Callable[["Tool", "CallContext", dict[str, Any]], "dict[str, Any] | None"]


class ResourceProvider(Protocol):
    """The resources of one URI scheme. `ctx` is the request (principal, client capabilities)."""

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Resources visible to the principal, one page; -32602 for a cursor not issued here."""

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        """Contents of one resource; -32602 when it does not exist for this principal."""


class ResourceTemplate(Protocol):
    """One resource template (`resources/templates/list`) and the completion of its variables
    (`completion/complete` with `ref/resource` naming exactly its `uri_template`)."""

    uri_template: str

    def describe(self) -> dict[str, Any]:
        """The ResourceTemplate descriptor (uriTemplate, name, title, ...)."""

    def complete(
        self, ctx: CallContext, argument: str, value: str, context: Mapping[str, str]
    ) -> Completion:
        """Values for variable `argument` starting with `value`; -32602 for an unknown one."""


class LiveStream(Protocol):
    """An open long-lived request: notifications queued by the server until it ends. The
    transport delivers them: `attach` a wake-up (called from any thread when something was
    queued or the stream ended), then `drain` after each wake-up."""

    dropped: bool

    def attach(self, wake: Callable[[], None]) -> None: ...

    def drain(self) -> tuple[list[bytes], bool]:
        """The encoded messages queued so far, and whether the stream has ended."""

    def close(self) -> None:
        """The client went away or cancelled: nothing more is queued."""

    def final(self) -> bytes:
        """The encoded response of a graceful end by the server."""

    def cancelled(self, reason: str) -> bytes:
        """The encoded `notifications/cancelled` of a teardown by the server (stdio)."""


class StreamMethod(Protocol):
    """A long-lived method an extension serves (say `subscriptions/listen`)."""

    def open(self, ctx: CallContext, params: dict[str, Any]) -> LiveStream:
        """Check the params (-32602) and open the stream for this request."""


def no_routes() -> Sequence[BaseRoute]:
    return ()


EMPTY: Mapping[str, Any] = MappingProxyType({})


class Extension(NamedTuple):
    """One extension's contributions. Everything is optional except the name. (A NamedTuple,
    not a frozen dataclass: the same immutable record, without compiling six methods at every
    start.)

    `http_routes` is a factory, called only when an HTTP app is built, so that a stdio start
    never imports Starlette for an extension's routes. `tool_meta_variant`, when given, names
    everything `tool_meta` depends on as a small key (say, whether the request declares the
    extension): `tools/list` is then one dict hit on bytes encoded per key, instead of calling
    the hook for every tool of every request.
    """

    name: str
    capabilities: Mapping[str, Any] = EMPTY
    extensions: Mapping[str, Mapping[str, Any]] = EMPTY
    tools: Sequence[Tool] = ()
    resource_providers: Mapping[str, ResourceProvider] = EMPTY
    # Schemes of its own providers whose resources never change: `resources/subscribe` and
    # `subscriptions/listen` accept their URIs (answered like any other, never firing).
    static_resource_schemes: frozenset[str] = frozenset()
    prompts: Sequence[Prompt] = ()
    resource_templates: Sequence[ResourceTemplate] = ()
    tool_meta: ToolMetaHook | None = None
    tool_meta_variant: ToolMetaVariant | None = None
    http_routes: RouteFactory = no_routes
    methods: Mapping[str, ExtensionMethod] = EMPTY
    tool_call_hook: ToolCallHook | None = None
    streams: Mapping[str, StreamMethod] = EMPTY
