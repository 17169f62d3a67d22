"""Request body bounds: 413 past the size limit (declared or actual), 408 past the read time.

The bounds apply when a route reads its body, not before: a route checks its headers first
(406, 415) and only then reads, so the order of refusals stays Accept, Content-Type, size, time.
Routes read their whole body before answering (there is no streaming request), so a refusal
here always comes before any response has started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Iterator
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import error_response
from notes_server.values import is_ascii_digits

BODY_READ_TIMEOUT_S = 10.0
log = logging.getLogger("notes_server.http")


class BodyTooLarge(Exception):
    pass


class BodyTooSlow(Exception):
    pass


def within(declared: str, limit: int) -> bool:
    """A Content-Length of ASCII digits only, no longer than the limit's own (so `int` never
    meets thousands of digits), and at most `limit`."""
    return is_ascii_digits(declared) and len(declared) <= len(str(limit)) and int(declared) <= limit


class BoundedBody:
    """An ASGI `receive` that enforces the bounds while the body is being read."""

    __slots__ = ("deadline", "declared", "done", "limit", "receive", "size", "timeout")

    def __init__(self, receive: Receive, declared: str | None, limit: int, timeout: float) -> None:
        self.receive = receive
        self.declared = declared
        self.limit = limit
        self.timeout = timeout
        self.deadline: float | None = None
        self.size = 0
        self.done = False

    async def __call__(self) -> Message:
        if self.done:  # the body is in: later calls only wait for a disconnect
            return await self.receive()
        if self.deadline is None:
            if self.declared is not None and not within(self.declared, self.limit):
                raise BodyTooLarge
            self.deadline = asyncio.get_running_loop().time() + self.timeout
        message = await self._within_deadline(self.deadline)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.done = True
        self.size += len(message.get("body", b""))
        if self.size > self.limit:
            raise BodyTooLarge
        return message

    async def _within_deadline(self, deadline: float) -> Message:
        """The next message, waiting at most until `deadline`. A message that is already in
        (a small body arrives with its head) is taken without a wait, and so without the cost
        of arming a timeout (~11 µs, a tenth of a whole request): the read is started by hand
        and only one that suspends is finished under the deadline."""
        read: Iterator[Any] = self.receive().__await__()
        try:
            pending = next(read)
        except StopIteration as done:
            message: Message = done.value
            return message
        try:
            async with asyncio.timeout_at(deadline):
                return await _Resumed(read, pending)
        except TimeoutError:
            raise BodyTooSlow from None


class _Resumed:
    """Await the rest of a read started by hand: what it waits on goes to the event loop and
    the outcome back to it, as `yield from` would have done from the start (PEP 380: `next`
    for None, `send` otherwise; `throw` and `close` where the iterator has them, since an
    ASGI server's awaitable need not be a generator)."""

    __slots__ = ("pending", "read")

    def __init__(self, read: Iterator[Any], pending: Any) -> None:
        self.read = read
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, Message]:
        read, pending = self.read, self.pending
        while True:
            try:
                try:
                    sent = yield pending
                except GeneratorExit:
                    close = getattr(read, "close", None)
                    if close is not None:
                        close()
                    raise
                except BaseException as exc:  # a cancellation (the deadline) goes into the read
                    throw = getattr(read, "throw", None)
                    if throw is None:
                        raise
                    pending = throw(exc)
                else:
                    pending = next(read) if sent is None else read.send(sent)  # type: ignore[attr-defined]
            except StopIteration as done:
                message: Message = done.value
                return message


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int, timeout: float = BODY_READ_TIMEOUT_S) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        body = BoundedBody(receive, declared, self.limit, self.timeout)
        try:
            await self.app(scope, body, send)
        except BodyTooLarge:
            await error_response(413, "Payload Too Large")(scope, receive, send)
        except BodyTooSlow:
            await error_response(408, "Request Timeout")(scope, receive, send)


async def no_answer(scope: Scope, receive: Receive, send: Send) -> None:
    """For a client that went away before its body was read: there is no one to answer."""


class BodyCheck:
    """The `/mcp` chain's last step (POSTs: GET and DELETE carry no body): the whole body read
    once under the bounds, or 413 / 408, or no answer at all for a client that went away."""

    def __init__(self, limit: int, timeout: float = BODY_READ_TIMEOUT_S) -> None:
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, request: McpRequest) -> ASGIApp | None:
        if request.method != "POST":
            return None
        declared = request.values.get(b"content-length")
        bounded = BoundedBody(
            request.receive, None if declared is None else declared[0], self.limit, self.timeout
        )
        chunks: list[bytes] = []
        try:
            while True:
                message = await bounded()
                if message["type"] != "http.request":
                    log.debug("client disconnected before its request was read")
                    return no_answer
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except BodyTooLarge:
            return error_response(413, "Payload Too Large")
        except BodyTooSlow:
            return error_response(408, "Request Timeout")
        request.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return None
