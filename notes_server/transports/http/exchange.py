"""One POSTed JSON-RPC message in, one HTTP status and body out. Synchronous, no Starlette.

This is the protocol pipeline as Streamable HTTP orders it: JSON parse (-32700), envelope
(-32600), notification (202), `_meta` shape (-32602), standard headers (-32020), then the shared
dispatcher (version -32022, method -32601, params, capability -32021, handler). Every step reuses
the protocol package; this module only adds the header rung and the status of each outcome.

It runs in a worker thread (the handlers use a synchronous database), so it must not touch the
event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from notes_server.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    McpError,
    to_wire,
)
from notes_server.features.extension import LiveStream
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    RequestId,
    decode,
    encode_error,
    encode_result,
)
from notes_server.protocol.headers import HeaderValues, check_headers
from notes_server.protocol.meta import read_meta_shape
from notes_server.protocol.progress import Emit, progress_sink
from notes_server.protocol.server import McpServer

log = logging.getLogger("notes_server.http")

# The one table from JSON-RPC error code to HTTP status (2026-07-28 Streamable HTTP).
# Codes the spec does not map (ordinary errors from a handler) are answered with 200.
STATUS_BY_CODE: dict[int, int] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
# -32602 means "400" only while the message is being framed (a malformed `_meta`). From a
# handler it is an ordinary error (unknown tool, workspace denied, bad requestState): 200.
HANDLER_ORDINARY = frozenset({INVALID_PARAMS, INTERNAL_ERROR})


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes | None


def status_for(code: int, *, from_handler: bool) -> int:
    if from_handler and code in HANDLER_ORDINARY:
        return 200
    return STATUS_BY_CODE.get(code, 200)


def _error(request_id: RequestId | None, error: dict[str, object], *, handler: bool) -> Reply:
    code = error.get("code")
    status = status_for(code if isinstance(code, int) else INTERNAL_ERROR, from_handler=handler)
    return Reply(status, encode_error(request_id, error))


def exchange(
    server: McpServer,
    body: bytes,
    headers: HeaderValues,
    principal: str,
    notify: Emit | None = None,
) -> Reply:
    """Answer one POST body for an authenticated principal; `notify` carries the request's
    progress notifications and log messages, when it asked for them."""
    try:
        message = decode(body)
    except DecodeFailure as failure:
        return undecodable(failure)
    return answer(server, message, headers, principal, notify)


def undecodable(failure: DecodeFailure) -> Reply:
    """The reply to a body that is no JSON-RPC request or notification (-32700, -32600, or
    -32602 for params the parser cannot hold), with the request's id when it was readable."""
    return _error(failure.request_id, to_wire(failure.error), handler=False)


def open_listen(
    server: McpServer, message: Request, headers: HeaderValues, principal: str
) -> Reply | LiveStream:
    """A long-lived request (`McpServer.serves_stream`): the same header rung as `answer`,
    then the open stream, or the error reply."""
    try:
        check_headers(headers, message, read_meta_shape(message.params))
    except McpError as exc:
        return _error(message.id, to_wire(exc), handler=False)
    stream, error = server.open_stream(message, principal)
    if stream is None:
        return _error(message.id, error or {}, handler=True)
    return stream


def answer(
    server: McpServer,
    message: Request | Notification,
    headers: HeaderValues,
    principal: str,
    notify: Emit | None = None,
) -> Reply:
    """`exchange` for a body already decoded (`McpPostHandler` decodes once, to choose the
    era)."""
    if isinstance(message, Notification):
        server.handle_notification(message)
        return Reply(202, None)
    try:
        check_headers(headers, message, read_meta_shape(message.params))
    except McpError as exc:
        return _error(message.id, to_wire(exc), handler=False)
    progress = progress_sink(message.params, notify)
    result, error = server.handle_request(message, principal, progress=progress, notify=notify)
    if error is not None:
        return _error(message.id, error, handler=True)
    assert result is not None
    return Reply(200, encode_result(message.id, result))
