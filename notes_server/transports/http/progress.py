"""Progress and log messages over HTTP: a request's `notifications/progress` and
`notifications/message` on its own SSE response.

The handler runs in a worker thread; each notification it emits is handed to the event loop
(`Relay.emit`, thread-safe). `McpPostHandler` starts with no stream at all: while the handler runs
it waits for whichever comes first, the reply or a first notification. A reply first (a request
without a progress token, or a tool that reported nothing) is the usual `application/json`
response; a notification first turns the response into `text/event-stream` (status 200): the
notifications in order, then the reply as the last event. Only POSTs whose body mentions
`progressToken` or the log level `_meta` key take this path (`may_stream`), so every other
request keeps its plain hand-off.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.types import Message, Receive, Scope, Send

STREAM_MARKERS = (b"progressToken", b"io.modelcontextprotocol/logLevel")
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_T = TypeVar("_T")


def may_stream(body: bytes) -> bool:
    """Whether the request may ask for notifications of its own (progress, log messages)."""
    return any(marker in body for marker in STREAM_MARKERS)


def sse_event(payload: bytes) -> bytes:
    return b"event: message\ndata: " + payload + b"\n\n"


def sse_chunk(payload: bytes) -> Message:
    """One JSON-RPC message as an SSE event of a streamed response, as an ASGI body message."""
    return {"type": "http.response.body", "body": sse_event(payload), "more_body": True}


class Relay:
    """Notifications from a worker thread to the coroutine serving the request, in order."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    def emit(self, payload: bytes) -> None:
        """Called from the worker thread."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, payload)

    async def first(self, work: asyncio.Future[_T]) -> bytes | None:
        """Wait for the first notification, or None when `work` finished without one."""
        getter: asyncio.Future[Any] = asyncio.ensure_future(self.queue.get())
        pending: set[asyncio.Future[Any]] = {work, getter}
        try:
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        finally:
            getter.cancel()
        if getter.done() and not getter.cancelled():
            payload: bytes = getter.result()
            return payload
        # The thread queued its notifications before it returned, and the loop runs callbacks
        # in order: anything emitted is in the queue by now.
        return None if self.queue.empty() else self.queue.get_nowait()

    async def forward(
        self, work: asyncio.Future[_T], send: Callable[[bytes], Awaitable[None]]
    ) -> _T:
        """Send every notification until `work` finishes (then the rest); its result."""
        while (payload := await self.first(work)) is not None:
            await send(payload)
        return work.result()


class ProgressStream:
    """The SSE response of a request that reported progress: what was relayed so far, the
    rest as it comes, then the reply (`finish` turns the finished work into its bytes)."""

    def __init__(
        self,
        relay: Relay,
        first: bytes,
        work: asyncio.Future[Any],
        finish: Callable[[asyncio.Future[Any]], bytes],
    ) -> None:
        self.relay = relay
        self.first = first
        self.work = work
        self.finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def event(payload: bytes) -> None:
            await send(sse_chunk(payload))

        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await event(self.first)
        with contextlib.suppress(Exception):  # a failed work: the last event says how
            await self.relay.forward(self.work, event)
        if self.work.done():
            await event(self.finish(self.work))
        await send({"type": "http.response.body", "body": b"", "more_body": False})
