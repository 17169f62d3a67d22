"""A long-lived request over HTTP (`subscriptions/listen`): the SSE response of its POST.

The stream's notifications are queued by the server's feed thread; this coroutine is woken
through the event loop (`call_soon_threadsafe`) and sends what is queued, with a keep-alive
comment every KEEPALIVE_S of silence. It holds no worker thread while it waits. The client
closing the response is the end (2026-07-28: closing the stream is the cancellation): the
listen is closed and nothing more is sent. A stream the server ends (its reader fell too far
behind: `await send` blocked while the bounded queue filled), or the server shutting down
(SIGTERM/SIGINT: `stream_end`), or its credential no longer accepted (re-checked before each
delivery and keep-alive: `stream_end`; nothing queued is sent then) gets its closing result as
the last event (`{"resultType": "complete", "_meta": {subscriptionId}}`, the spec's graceful
end), and the response completes.
"""

from __future__ import annotations

import asyncio

from starlette.types import Receive, Scope, Send

from notes_server.features.extension import LiveStream
from notes_server.transports.http.progress import SSE_HEADERS, sse_chunk
from notes_server.transports.http.stream_end import StreamEnd

KEEPALIVE_S = 15.0
_KEEPALIVE = {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}


class ListenResponse:
    """The ASGI app answering one open listen."""

    def __init__(self, stream: LiveStream, keepalive_s: float = KEEPALIVE_S) -> None:
        self.stream = stream
        self.keepalive_s = keepalive_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        stream = self.stream

        def wake() -> None:
            loop.call_soon_threadsafe(ready.set)

        stream.attach(wake)
        end = StreamEnd(scope, receive)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            while not end.client_gone:
                ready.clear()
                messages, ended = stream.drain()
                refused = bool(messages) and not await end.authorized()
                for message in () if refused else messages:
                    await send(sse_chunk(message))
                if ended or refused or end.shutting_down:
                    if stream.dropped or refused or end.shutting_down:
                        await send(sse_chunk(stream.final()))
                    break
                if not await end.wait(ready, self.keepalive_s):
                    if not await end.authorized():
                        await send(sse_chunk(stream.final()))
                        break
                    await send(_KEEPALIVE)
            if not end.client_gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the connection is gone
        finally:
            stream.close()
            await end.close()
