"""The outermost middleware: whatever goes wrong, the client gets JSON, never a plain-text 500.

A timeout is 503 and any other failure (authentication included) 500, both a JSON-RPC -32603
with a null id. A database fault names its cause; anything else says only "Internal error" and
its traceback goes to the log. A client that went away mid-body gets no answer at all.
"""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notes_server.errors import INTERNAL_ERROR
from notes_server.protocol.server import internal_error
from notes_server.transports.http.responses import error_response
from notes_server.transports.http.threads import RequestTimeout

log = logging.getLogger("notes_server.http")


class ErrorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await answer_or_fail(self.app, scope, receive, send)


async def answer_or_fail(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """`app`'s answer; a failure before it started is answered with `failure_response`, one
    after is raised (too late for an answer: the server closes the connection)."""
    started = False

    async def send_tracked(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, receive, send_tracked)
    except ClientDisconnect:
        log.debug("client disconnected before its request was read")
    except Exception as exc:
        if started:
            raise
        await failure_response(exc)(scope, receive, send)


def failure_response(exc: Exception) -> Response:
    """503 for a timeout, else 500 (the cause logged, named only when it is a database fault)."""
    if isinstance(exc, RequestTimeout):
        return error_response(503, str(exc), code=INTERNAL_ERROR)
    error = internal_error(exc, "an HTTP request")
    return error_response(500, str(error["message"]), code=INTERNAL_ERROR)
