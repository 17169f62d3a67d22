"""Dispatch: one decoded message in, at most one encoded reply out.

The order of checks is the documented one: envelope, `_meta` shape, version, method, params.
Every result is stamped with serverInfo; every unexpected exception leaves as a -32603 that
says nothing more, except that a database fault names its class (read-only, full, busy...).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from notes_server.config import SettingsError
from notes_server.errors import McpError, MethodNotFound, database_fault, to_wire
from notes_server.features.extension import ExtensionMethod, LiveStream, StreamMethod, ToolCallHook
from notes_server.features.prompts.base import PromptRegistry
from notes_server.protocol import methods
from notes_server.protocol.context import RequestContext
from notes_server.protocol.envelope import (
    DecodeFailure,
    EncodedResult,
    Notification,
    Request,
    decode,
    encode_error,
    encode_result,
)
from notes_server.protocol.log_messages import log_sink, requested_level
from notes_server.protocol.meta import ClientMeta, read_meta
from notes_server.protocol.progress import Emit, progress_sink
from notes_server.protocol.server_view import ResourceProvider, ResourceTemplate, ServerView
from notes_server.protocol.versions import META_SERVER_INFO
from notes_server.security.uri import WorkspaceUri
from notes_server.tools.base import CallContext, ProgressSink

if TYPE_CHECKING:
    from notes_server.tools.registry import ToolRegistry

log = logging.getLogger("notes_server.protocol")

Handler = Callable[[ServerView, RequestContext, dict[str, Any]], dict[str, Any]]

HANDLERS: dict[str, Handler] = {
    "server/discover": methods.discover,
    "tools/list": methods.tools_list,
    "tools/call": methods.tools_call,
    "resources/list": methods.resources_list,
    "resources/templates/list": methods.resource_templates_list,
    "resources/read": methods.resources_read,
    "prompts/list": methods.prompts_list,
    "prompts/get": methods.prompts_get,
    "completion/complete": methods.completion_complete,
}
# Methods served only when the server declares the capability (else -32601, as for any
# method it does not serve): a server composed without prompts has no prompts/*.
GATED: dict[str, str] = {
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completions",
}


# Answered from results built once, without the database.
STATIC_METHODS = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/templates/list"}
)


def internal_error(exc: Exception, during: str) -> dict[str, Any]:
    """The -32603 for an unexpected exception: a database fault (as the store classifies it)
    names its cause (and is logged in one line, since it is the environment, not a bug);
    anything else is logged in full."""
    fault = database_fault(exc)
    if fault is None:
        log.exception("internal error while handling %s", during[:64])
    else:
        words = fault.detail or str(exc)[:200]
        log.error("database fault while handling %s: %s (%s)", during[:64], fault.cause, words)
    return to_wire(exc)


DEFAULT_CAPABILITIES: dict[str, Any] = {"tools": {}, "resources": {}}
MAX_VARIANTS = 16


class McpServer:
    """The server: tools, resources and capabilities as composed by the extension registry
    (`features.registry.ExtensionRegistry`), answering one message at a time."""

    def __init__(
        self,
        registry: ToolRegistry,
        resources: ResourceProvider,
        server_info: dict[str, Any],
        capabilities: dict[str, Any] | None = None,
        prompts: PromptRegistry | None = None,
        templates: Sequence[ResourceTemplate] = (),
        extension_methods: Mapping[str, ExtensionMethod] | None = None,
        tool_call_hook: ToolCallHook | None = None,
        streams: Mapping[str, StreamMethod] | None = None,
    ) -> None:
        self.registry = registry
        self.resources = resources
        self.prompts = PromptRegistry([]) if prompts is None else prompts
        self.templates = tuple(templates)
        self.streams: Mapping[str, StreamMethod] = {} if streams is None else streams
        self.server_info = server_info
        self.capabilities = DEFAULT_CAPABILITIES if capabilities is None else capabilities
        self.extension_methods: Mapping[str, ExtensionMethod] = dict(extension_methods or {})
        shadowed = sorted(set(self.extension_methods) & set(HANDLERS))
        if shadowed:
            raise SettingsError(f"an extension may not serve the core method {shadowed[0]!r}")
        self.tool_call_hook = tool_call_hook
        self._static: dict[str, EncodedResult] = {}
        self._variants: dict[tuple[str, Hashable], EncodedResult] = {}
        self._variants_lock = threading.Lock()

    def static_result(self, key: str, build: Callable[[], dict[str, Any]]) -> EncodedResult:
        """A result identical for every request, stamped and encoded on first use."""
        cached = self._static.get(key)
        if cached is None:
            cached = EncodedResult({**build(), "_meta": {META_SERVER_INFO: self.server_info}})
            self._static[key] = cached
        return cached

    def variant_result(
        self, key: str, variant: Hashable, build: Callable[[], dict[str, Any]]
    ) -> EncodedResult:
        """A result that depends on the request only through `variant` (say, the `_meta` that
        extensions add for its capabilities). The last few variants stay encoded; the bound
        keeps a client that varies its capabilities from growing the cache."""
        cached = self._variants.get((key, variant))  # one dict read: atomic, no lock
        if cached is not None:
            return cached
        cached = EncodedResult({**build(), "_meta": {META_SERVER_INFO: self.server_info}})
        with self._variants_lock:
            if len(self._variants) >= MAX_VARIANTS:
                del self._variants[next(iter(self._variants))]
            self._variants[(key, variant)] = cached
        return cached

    def runs_on_loop(self, method: str, name: str | None) -> bool:
        """Whether a request for `method` (and tool `name`) may run on a transport's event
        loop, being cheap and bounded: a static result, or a tool whose `runs_on_loop()` says
        so. A transport may then skip its worker thread; the caller must make sure the message
        really is that request."""
        if method in STATIC_METHODS:
            return True
        if method != "tools/call" or name is None:
            return False
        tool = self.registry.get(name)
        return tool is not None and tool.runs_on_loop()

    def handle_raw(
        self, raw: bytes | str, principal: str, notify: Emit | None = None
    ) -> bytes | None:
        """Decode, dispatch and encode one message; None for notifications. `notify` writes
        the request's own notifications (progress, log messages) before the reply, when it
        asked for them."""
        try:
            message = decode(raw)
        except DecodeFailure as failure:
            return encode_error(failure.request_id, to_wire(failure.error))
        if isinstance(message, Notification):
            self.handle_notification(message)
            return None
        progress = progress_sink(message.params, notify)
        result, error = self.handle_request(message, principal, progress=progress, notify=notify)
        if error is not None:
            return encode_error(message.id, error)
        assert result is not None
        return encode_result(message.id, result)

    def serves_stream(self, message: Request | Notification) -> bool:
        """Whether `message` is a request for a long-lived method (`open_stream`), which a
        transport must deliver as a stream rather than one reply."""
        return isinstance(message, Request) and message.method in self.streams

    def open_stream(
        self,
        request: Request,
        principal: str,
        *,
        roots: tuple[WorkspaceUri, ...] | None = None,
    ) -> tuple[LiveStream | None, dict[str, Any] | None]:
        """Open a long-lived request: (stream, None) or (None, error object), checked in the
        same order as any request (`_meta`, version, params)."""
        try:
            meta = read_meta(request.params)
            ctx = CallContext(principal, meta.capabilities, request.id, roots=roots)
            return self.streams[request.method].open(ctx, request.params), None
        except McpError as exc:
            return None, to_wire(exc)
        except Exception as exc:
            return None, internal_error(exc, request.method)

    def handle_notification(self, message: Notification) -> None:
        """Notifications are never answered; requests here finish synchronously, so a
        cancellation always arrives too late and there is nothing to undo."""
        log.debug("notification %s ignored", message.method[:64])

    def handle_request(
        self,
        request: Request,
        principal: str,
        *,
        roots: tuple[WorkspaceUri, ...] | None = None,
        progress: ProgressSink | None = None,
        notify: Emit | None = None,
        meta: ClientMeta | None = None,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Return (result, None) or (None, error object). `roots` narrows what the principal
        may touch (a legacy session's roots); `progress` receives a tool's progress reports;
        `notify` writes the log messages of a request that set a log level in `_meta`;
        `meta` is `read_meta(request.params)` when the caller already read it (a 2025-11-25
        call's later rounds carry the `_meta` of its first, read once)."""
        try:
            result = self._dispatch(request, principal, roots, progress, notify, meta)
        except McpError as exc:
            if getattr(exc, "reason", None):
                log.info("request %r rejected: %s", request.id, getattr(exc, "reason", ""))
            return None, to_wire(exc)
        except Exception as exc:
            return None, internal_error(exc, request.method)
        return result, None

    def _dispatch(
        self,
        request: Request,
        principal: str,
        roots: tuple[WorkspaceUri, ...] | None,
        progress: ProgressSink | None,
        notify: Emit | None,
        meta: ClientMeta | None = None,
    ) -> dict[str, Any]:
        if meta is None:
            meta = read_meta(request.params)
        handler = HANDLERS.get(request.method)
        if handler is None and request.method in self.extension_methods:
            handler = methods.extension_method(self.extension_methods[request.method])
        gate = GATED.get(request.method)
        if handler is None or (gate is not None and gate not in self.capabilities):
            raise MethodNotFound(f"Method not found: {request.method[:64]}")
        level = requested_level(request.params)
        ctx = RequestContext(
            request.id,
            request.method,
            principal,
            meta.protocol_version,
            meta.capabilities,
            meta.client_info,
            roots,
            progress,
            log_sink(level, notify),
        )
        result = handler(self, ctx, request.params)
        if not isinstance(result, EncodedResult):  # static results are stamped already
            result["_meta"] = {META_SERVER_INFO: self.server_info}
        return result
