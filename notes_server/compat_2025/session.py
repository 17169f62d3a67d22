"""One 2025-11-25 session on a stdio connection: the handshake and the request bridge.

Every legacy request is stamped with the `_meta` a modern client would have sent (capabilities
from `initialize`), once per call (`prepare`), and dispatched through the same `McpServer`. A
`tools/call` that answers `input_required` runs the rounds loop (`rounds.call_rounds`), here
driven on the stdio channel: real server-initiated requests (`elicitation/create`, ...) whose
answers go back to the core as `inputResponses` with the sealed `requestState`, for at most
MAX_ROUNDS rounds. Results lose `resultType`, caching hints and `_meta` serverInfo.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from notes_server.compat_2025.channel import ClientChannel, RequestCancelled, Unanswered, dump
from notes_server.compat_2025.roots import (
    NARROWED_METHODS,
    ROOTS_WAIT_S,
    GrantLookup,
    Roots,
    declares_roots,
    log_outside,
    missing_workspace,
    optional_workspace,
    read_roots,
    roots_request,
    usable,
)
from notes_server.compat_2025.rounds import (
    MAX_ROUNDS,
    Ask,
    Dispatch,
    Notify,
    OpenPage,
    Outcome,
    Pause,
    Step,
    call_rounds,
    drive,
)
from notes_server.compat_2025.subscriptions import METHODS as SUBSCRIBE_METHODS
from notes_server.compat_2025.subscriptions import SessionSubscriptions
from notes_server.compat_2025.translate import (
    LEGACY_METHODS,
    LOGGED_METHODS,
    capability_refusal,
    initialize_result,
    legacy_error,
    legacy_result,
    modern_capabilities,
    modern_params,
    needs_capability,
    negotiate,
    tool_error_result,
)
from notes_server.errors import InvalidParams, McpError, MethodNotFound, to_wire
from notes_server.protocol.envelope import Request, RequestId
from notes_server.protocol.log_messages import check_level
from notes_server.protocol.meta import ClientMeta, read_meta
from notes_server.protocol.progress import Emit, progress_sink

if TYPE_CHECKING:
    from notes_server.protocol.server import McpServer

MAX_NAME_ECHO = 64
ROOTS_NOT_ANSWERED = "The server stopped waiting for the roots/list answer"

log = logging.getLogger("notes_server.legacy")

__all__ = [
    "MAX_ROUNDS",
    "LegacyHandler",
    "LegacySession",
    "Outcome",
    "Prepared",
    "start_session",
]


class LegacySession(NamedTuple):
    """What `initialize` negotiated, and the client's roots once known (`roots_known`). A
    NamedTuple: immutable, and unlike a dataclass nothing to compile at start."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    roots: Roots | None = None
    roots_known: bool = False
    roots_generation: int = 0
    log_level: str | None = None  # `logging/setLevel`; None: no log messages


class Prepared(NamedTuple):
    """A legacy request as the core takes it, made once per call: `request` with the session's
    `_meta` stamped (and a missing workspace filled in from the roots), `meta` read from it,
    so the rounds of a `tools/call` neither stamp nor read it again. `refused` instead: the
    request's answer without the core (no usable workspace, malformed `_meta`)."""

    request: Request
    meta: ClientMeta | None = None
    refused: Outcome | None = None


def start_session(params: dict[str, Any]) -> LegacySession:
    """Validate `initialize` params; an unknown version is answered, not refused. The session
    keeps only what the server uses (`modern_capabilities`, `kept_client_info`), bounded."""
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise InvalidParams("Invalid params: initialize needs protocolVersion as a string")
    declared = params.get("capabilities", {})
    if not isinstance(declared, dict):
        raise InvalidParams("Invalid params: initialize capabilities must be an object")
    version = negotiate(requested)
    return LegacySession(
        version, modern_capabilities(declared, version), kept_client_info(params.get("clientInfo"))
    )


CLIENT_INFO_FIELDS = ("name", "title", "version")
MAX_CLIENT_INFO_FIELD = 256


def kept_client_info(client_info: object) -> dict[str, str] | None:
    """`clientInfo`'s name, title and version (strings; other members are not kept): each
    at most MAX_CLIENT_INFO_FIELD characters, a longer one is -32602."""
    if not isinstance(client_info, dict):
        return None
    kept: dict[str, str] = {}
    for field in CLIENT_INFO_FIELDS:
        value = client_info.get(field)
        if not isinstance(value, str):
            continue
        if len(value) > MAX_CLIENT_INFO_FIELD:
            raise InvalidParams(
                f"Invalid params: initialize clientInfo.{field} is longer than "
                f"{MAX_CLIENT_INFO_FIELD} characters"
            )
        kept[field] = value
    return kept


class LegacyHandler:
    """Answers one session's requests; `channel` asks the client (stdio), None on HTTP, whose
    transport asks on the SSE stream and uses `start`, `dispatch` and `finish` itself (with the
    same rounds loop). `roots_wait_s`
    bounds the wait for a stdio client's `roots/list` answer."""

    def __init__(
        self,
        server: McpServer,
        principal: str,
        session: LegacySession,
        channel: ClientChannel | None = None,
        grants: GrantLookup | None = None,
        roots_wait_s: float = ROOTS_WAIT_S,
        subscriptions: SessionSubscriptions | None = None,
        announces_subscriptions: bool = False,
    ) -> None:
        """`announces_subscriptions`: `initialize` declares `subscribe`/`listChanged` though
        no `subscriptions` is given (HTTP, whose transport serves them itself)."""
        self.server = server
        self.announces_subscriptions = announces_subscriptions
        self.subscriptions = subscriptions
        self.principal = principal
        self.session = session
        self.channel = channel
        self.grants = grants
        self.roots_wait_s = roots_wait_s
        self.roots: Roots | None = session.roots
        self.roots_known = session.roots_known

    @property
    def narrowed(self) -> bool:
        return declares_roots(self.session.capabilities)

    def roots_needed(self, method: str) -> bool:
        """The client declared roots, they are not known yet, and `method` depends on them."""
        return self.narrowed and not self.roots_known and method in NARROWED_METHODS

    def learn_roots(self, response: dict[str, Any] | None) -> Roots | None:
        """Take the client's `roots/list` response (None: none came); log ignored roots."""
        roots = read_roots(response)
        if self.grants is not None and roots:
            log_outside(self.principal, roots, self.grants(self.principal))
        self.roots, self.roots_known = roots, True
        return roots

    def narrowing(self) -> Roots | None:
        """The roots this session's requests are narrowed to (None: the grants alone); a
        client that declared roots is narrowed to nothing until they are known."""
        if not self.narrowed:
            return None
        return self.roots if self.roots_known else ()

    def refresh_roots(self) -> None:
        """Ask a stdio client for its roots now (after `initialized`, on list_changed). A client
        that does not answer within `roots_wait_s` is told the question is withdrawn and is
        treated as over HTTP (a wait that runs out there leaves no answer): nothing is usable
        until it says its roots changed. The requests that queued meanwhile are served next."""
        if self.channel is None or not self.narrowed:
            return
        question = roots_request(self.channel.new_id())
        try:
            response = self.channel.ask(question, None, self.roots_wait_s)
        except Unanswered:
            self.channel.cancel(question["id"], ROOTS_NOT_ANSWERED)
            log.warning(
                "legacy client did not answer roots/list within %g s; no workspace is usable "
                "until it sends notifications/roots/list_changed",
                self.roots_wait_s,
            )
            self.roots, self.roots_known = (), True
            return
        self.learn_roots(response)

    def initialize(self, request_id: RequestId) -> Outcome:
        """Answer `initialize` from the core's own `server/discover` result."""
        result, error = self.call(Request(request_id, "server/discover", {}))
        if error is not None or result is None:
            return None, error
        info = self.session.client_info or {}
        log.info(
            "legacy session: %s negotiated MCP %s",
            str(info.get("name", "unnamed client"))[:MAX_NAME_ECHO],
            self.session.version,
        )
        served = self.subscriptions is not None or self.announces_subscriptions
        if self.subscriptions is not None:
            self.subscriptions.start_session(self.narrowing)
        return initialize_result(
            self.session.version, result, self.server.server_info, subscriptions=served
        ), None

    def refusal(self, method: str) -> Outcome | None:
        """`ping` answered, an unknown method refused; None for methods the core serves
        (and `logging/setLevel`, which `set_log_level` answers)."""
        if method == "ping":
            return {}, None
        if method == "logging/setLevel" and "logging" in self.server.capabilities:
            return None
        if method not in LEGACY_METHODS:
            return None, to_wire(MethodNotFound(f"Method not found: {method[:MAX_NAME_ECHO]}"))
        return None

    def chosen_level(self, params: dict[str, Any]) -> str:
        """The level of a `logging/setLevel` request, or -32602."""
        return check_level(params.get("level"), "level")

    def set_log_level(self, level: str) -> None:
        """This session's later requests carry `level` (stdio; HTTP keeps it in the row)."""
        self.session = self.session._replace(log_level=level)

    def handle(self, request: Request) -> Outcome:
        """(legacy result, None) or (None, legacy error). Raises RequestCancelled."""
        if self.subscriptions is not None and request.method in SUBSCRIBE_METHODS:
            if self.narrowed and not self.roots_known:
                self.refresh_roots()  # a subscription resolves within the roots
            return self.subscriptions.handle(request.method, request.params)
        refused = self.refusal(request.method)
        if refused is not None:
            return refused
        if request.method == "logging/setLevel":
            try:
                self.set_log_level(self.chosen_level(request.params))
            except InvalidParams as exc:
                return None, to_wire(exc)
            return {}, None
        if self.roots_needed(request.method):
            self.refresh_roots()
        if request.method == "tools/call":
            result, error = self._call_with_rounds(request)
        else:
            result, error = self.call(request)
        return self.finish(request.method, result, error)

    def finish(self, method: str, result: dict[str, Any] | None, error: Any) -> Outcome:
        """The core's outcome in legacy shape."""
        if error is not None:
            if needs_capability(method, error):
                return tool_error_result(capability_refusal(error)), None
            return None, legacy_error(method, error)
        assert result is not None
        translated = legacy_result(method, result)
        if method == "tools/list" and self.narrowed and isinstance(translated.get("tools"), list):
            translated["tools"] = optional_workspace(translated["tools"])
        return translated, None

    def prepare(self, request: Request) -> Prepared:
        """Stamp the session's `_meta` on the request and narrow it to the client's roots
        (a `tools/call` without `workspaceUri` gets the one usable workspace, or a tool
        error); read the stamped `_meta` as the core would, once for all rounds."""
        session = self.session
        level = session.log_level if request.method in LOGGED_METHODS else None
        params = modern_params(request.params, session.capabilities, session.client_info, level)
        if request.method == "tools/call":
            params, refused = self._default_workspace(params, self.narrowing())
            if refused is not None:
                return Prepared(request, refused=(refused, None))
        try:
            meta = read_meta(params)
        except McpError as exc:  # the core's own answer to this `_meta`
            return Prepared(request, refused=(None, to_wire(exc)))
        return Prepared(Request(request.id, request.method, params), meta)

    def dispatch(
        self, request: Request, emit: Emit | None = None, meta: ClientMeta | None = None
    ) -> Outcome:
        """A prepared request (`prepare`) through the core, narrowed to the client's roots
        (unknown roots of a client that declared them: nothing usable), with its `meta`.
        Progress goes through `emit` (HTTP: the request's stream), else the stdio channel."""
        if emit is None and self.channel is not None:
            emit = self.channel.writer.write
        return self.server.handle_request(
            request,
            self.principal,
            roots=self.narrowing(),
            progress=progress_sink(request.params, emit),
            notify=emit,
            meta=meta,
        )

    def start(self, request: Request, emit: Emit | None = None) -> tuple[Prepared, Outcome]:
        """Prepare the request and run its first round: one call, so that HTTP hands both to
        one worker thread."""
        prepared = self.prepare(request)
        if prepared.refused is not None:
            return prepared, prepared.refused
        return prepared, self.dispatch(prepared.request, emit, prepared.meta)

    def call(self, request: Request) -> Outcome:
        """A request answered in one round."""
        return self.start(request)[1]

    def _default_workspace(
        self, params: dict[str, Any], roots: Roots | None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Fill in a missing workspaceUri with the one granted workspace among the roots;
        with none or several (or no roots), a tool error that lists the usable ones."""
        name, arguments = params.get("name"), params.get("arguments", {})
        tool = self.server.registry.get(name) if isinstance(name, str) else None
        if tool is None or not isinstance(arguments, dict) or "workspaceUri" in arguments:
            return params, None
        if "workspaceUri" not in tool.input_schema.get("properties", {}):
            return params, None
        granted = [] if self.grants is None else self.grants(self.principal)
        candidates = usable(granted, roots)
        if roots is not None and len(candidates) == 1:
            return {**params, "arguments": {**arguments, "workspaceUri": candidates[0]}}, None
        return params, tool_error_result(missing_workspace(candidates, roots))

    def _call_with_rounds(self, request: Request) -> Outcome:
        """The rounds loop (`rounds.call_rounds`) driven on the stdio connection: each
        question waits for the client's answer on stdin, a cancellation of the call ends it."""
        prepared, first = self.start(request)
        if prepared.refused is not None:
            return first
        channel = self.channel
        assert channel is not None, "only a stdio session asks through a channel"
        serving, meta = request.id, prepared.meta

        def take(step: Step) -> Any:
            if isinstance(step, Dispatch):
                return self.dispatch(step.request, None, meta)
            if isinstance(step, Ask):
                try:
                    return channel.ask(step.message, serving)
                except RequestCancelled:
                    channel.cancel(step.message["id"], "The request was cancelled by the client")
                    raise
            if isinstance(step, Notify):
                channel.writer.write(dump(step.message))
            elif isinstance(step, Pause):
                channel.idle(step.seconds, serving)
            else:
                assert isinstance(step, OpenPage)  # the deadline is the loop's; nothing to keep
            return None

        rounds = call_rounds(
            prepared.request, first, version=self.session.version, new_id=channel.new_id
        )
        return drive(rounds, take)
