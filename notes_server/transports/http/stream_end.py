"""What ends a long-lived response from outside it: the client going away, shutdown, or its
credential no longer being accepted.

A long-lived response (a 2026-07-28 `subscriptions/listen`, a 2025-11-25 session's GET stream)
waits for its next message, a keep-alive tick, or one of these ends. On SIGTERM/SIGINT uvicorn
stops accepting connections, calls each open connection's protocol `shutdown()` and then waits
(up to its graceful timeout) for every response to complete; a stream that only noticed at
its next keep-alive held the process that long. Our protocols (`protocol.py`) put one event
per connection into each request's scope (`SHUTDOWN_KEY`) and set it in `shutdown()`: the
stream sees it at once, ends the way its protocol says (a listen with its closing result),
completes its response, and uvicorn closes the connection.

A stream outlives the check of the credential that opened it: the `/mcp` chain's auth step
puts a re-check of that request's credential into its scope (`CREDENTIAL_KEY`), and a stream
calls `authorized()` before each delivery and each keep-alive. A token revoked or expired
(or a JWT past its `exp`) since, another principal for the same credential, a failure of the
check itself, or no re-check at all ends the stream (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.types import Receive, Scope

SHUTDOWN_KEY = "notes_server.shutdown"
CREDENTIAL_KEY = "notes_server.credential"
#: Whether the request's credential is still accepted for the principal it was accepted for.
Recheck = Callable[[], Awaitable[bool]]
log = logging.getLogger("notes_server.http")


def mark_shutdown(scope: MutableMapping[str, Any], event: asyncio.Event) -> None:
    """Give a request the event its connection's graceful shutdown sets (the protocol)."""
    scope[SHUTDOWN_KEY] = event


def mark_credential(scope: MutableMapping[str, Any], recheck: Recheck) -> None:
    """Give a request the re-check of its credential (the `/mcp` chain's auth step)."""
    scope[CREDENTIAL_KEY] = recheck


async def _disconnected(receive: Receive) -> None:
    """Return when the client goes away (the request body was read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class StreamEnd:
    """The ends of one long-lived response: `gone` (the client left) or `stopping` (the
    server shuts down; never, for a request served without our protocols)."""

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(receive))
        event = scope.get(SHUTDOWN_KEY)
        self.stopping: asyncio.Future[Any] | None = (
            asyncio.ensure_future(event.wait()) if isinstance(event, asyncio.Event) else None
        )
        self.recheck: Recheck | None = scope.get(CREDENTIAL_KEY)

    async def authorized(self) -> bool:
        """The credential that opened the stream is still accepted for its principal."""
        if self.recheck is None:
            return False
        try:
            accepted = await self.recheck()
        except Exception:
            log.warning("re-checking an open stream's credential failed", exc_info=True)
            return False
        if not accepted:
            log.info("an open stream ended: its credential is no longer accepted")
        return accepted

    @property
    def client_gone(self) -> bool:
        return self.gone.done()

    @property
    def shutting_down(self) -> bool:
        return self.stopping is not None and self.stopping.done()

    @property
    def reached(self) -> bool:
        return self.client_gone or self.shutting_down

    async def wait(self, woken: asyncio.Event, timeout: float) -> bool:
        """Until `woken` is set, an end is reached or `timeout` passed (then False)."""
        waiter = asyncio.ensure_future(woken.wait())
        futures: set[asyncio.Future[Any]] = {waiter, self.gone}
        if self.stopping is not None:
            futures.add(self.stopping)
        try:
            done, _ = await asyncio.wait(
                futures, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
        return bool(done)

    async def close(self) -> None:
        for future in (self.gone, self.stopping):
            if future is not None:
                future.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await future
