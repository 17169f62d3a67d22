"""One 2025-11-25 session on a stdio connection: the handshake and the request bridge.

Every legacy request is stamped with the `_meta` a modern client would have sent (capabilities
from `initialize`) and dispatched through the same `McpServer`. A `tools/call` that answers
`input_required` is turned into real server-initiated requests (`elicitation/create`, ...);
the answers go back to the core as `inputResponses` with the sealed `requestState`, for at most
MAX_ROUNDS rounds. Results lose `resultType`, caching hints and `_meta` serverInfo.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from notes_server.errors import InvalidParams, MethodNotFound, to_wire
from notes_server.legacy.channel import ClientChannel, RequestCancelled
from notes_server.legacy.translate import (
    CONFIRMATION_EXPIRED,
    LEGACY_METHODS,
    NEEDS_ELICITATION,
    SERVER_REQUESTS,
    TOO_MANY_ROUNDS,
    expired_confirmation,
    initialize_result,
    input_response,
    legacy_error,
    legacy_result,
    modern_capabilities,
    modern_params,
    needs_capability,
    negotiate,
    server_request,
    tool_error_result,
)
from notes_server.protocol.envelope import Request, RequestId

if TYPE_CHECKING:
    from notes_server.protocol.dispatch import McpServer

MAX_ROUNDS = 5
MAX_NAME_ECHO = 64

log = logging.getLogger("notes_server.legacy")

Outcome = tuple[dict[str, Any] | None, dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class LegacySession:
    """What `initialize` negotiated; the only per-connection state there is."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None


def start_session(params: dict[str, Any]) -> LegacySession:
    """Validate `initialize` params; an unknown version is answered, not refused."""
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise InvalidParams("Invalid params: initialize needs protocolVersion as a string")
    declared = params.get("capabilities", {})
    if not isinstance(declared, dict):
        raise InvalidParams("Invalid params: initialize capabilities must be an object")
    client_info = params.get("clientInfo")
    return LegacySession(
        negotiate(requested),
        modern_capabilities(declared),
        client_info if isinstance(client_info, dict) else None,
    )


class LegacyHandler:
    def __init__(
        self, server: McpServer, principal: str, session: LegacySession, channel: ClientChannel
    ) -> None:
        self.server = server
        self.principal = principal
        self.session = session
        self.channel = channel

    def initialize(self, request_id: RequestId) -> Outcome:
        """Answer `initialize` from the core's own `server/discover` result."""
        result, error = self._dispatch(Request(request_id, "server/discover", {}))
        if error is not None or result is None:
            return None, error
        info = self.session.client_info or {}
        log.info(
            "legacy session: %s negotiated MCP %s",
            str(info.get("name", "unnamed client"))[:MAX_NAME_ECHO],
            self.session.version,
        )
        return initialize_result(self.session.version, result, self.server.server_info), None

    def handle(self, request: Request) -> Outcome:
        """(legacy result, None) or (None, legacy error). Raises RequestCancelled."""
        method = request.method
        if method == "ping":
            return {}, None
        if method not in LEGACY_METHODS:
            return None, to_wire(MethodNotFound(f"Method not found: {method[:MAX_NAME_ECHO]}"))
        if method == "tools/call":
            result, error = self._call_with_rounds(request)
        else:
            result, error = self._dispatch(request)
        if error is not None:
            if needs_capability(method, error):
                return tool_error_result(NEEDS_ELICITATION), None
            return None, legacy_error(method, error)
        assert result is not None
        return legacy_result(method, result), None

    def _dispatch(self, request: Request) -> Outcome:
        session = self.session
        params = modern_params(request.params, session.capabilities, session.client_info)
        return self.server.handle_request(
            Request(request.id, request.method, params), self.principal
        )

    def _call_with_rounds(self, request: Request) -> Outcome:
        rounds = 0
        result, error = self._dispatch(request)
        while result is not None and result.get("resultType") == "input_required":
            if rounds == MAX_ROUNDS:
                return tool_error_result(TOO_MANY_ROUNDS.format(rounds=MAX_ROUNDS)), None
            rounds += 1
            request = Request(request.id, request.method, self._retry(request, result))
            result, error = self._dispatch(request)
        if rounds and error is not None and expired_confirmation(error):
            return tool_error_result(CONFIRMATION_EXPIRED), None
        return result, error

    def _retry(self, request: Request, required: dict[str, Any]) -> dict[str, Any]:
        """Ask the client every embedded input request; the original params plus answers."""
        responses: dict[str, Any] = {}
        embedded_requests = required.get("inputRequests") or {}
        for key, embedded in embedded_requests.items():
            method = embedded.get("method") if isinstance(embedded, dict) else None
            if method not in SERVER_REQUESTS:
                continue
            message = server_request(self.session.version, self.channel.new_id(), embedded)
            try:
                response = self.channel.ask(message, request.id)
            except RequestCancelled:
                self.channel.cancel(message["id"], "The request was cancelled by the client")
                raise
            answer = input_response(method, response)
            if answer is not None:
                responses[key] = answer
        params = {
            k: v for k, v in request.params.items() if k not in ("inputResponses", "requestState")
        }
        params["inputResponses"] = responses
        if "requestState" in required:
            params["requestState"] = required["requestState"]
        return params
