"""A bounded set of worker threads for the blocking work of HTTP requests.

The token lookup and the protocol pipeline use a synchronous database, so they run in threads,
bounded in time by the request timeout. A call that times out cannot be stopped: its thread is
abandoned and finishes on its own, holding its pooled connection until then. anyio's
`CapacityLimiter` does not bound that (it releases the token when the caller gives up, while the
thread runs on), so here the threads are a fixed pool: abandoned calls occupy at most `size`
threads, later requests wait for a free one within their own timeout (503 "Server busy"), and a
queued call that times out is cancelled before it ever runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger("notes_server.http")

#: Threads per server process: at most the default SQLAlchemy pool (5 + 10 overflow), so an
#: abandoned thread can hold a pooled connection but never make others wait for one.
WORKER_THREADS = 10
THREAD_NAME_PREFIX = "notes-http"
_T = TypeVar("_T")


class RequestTimeout(Exception):
    """Blocking work did not finish within the request timeout (answered with 503)."""


class WorkerThreads:
    def __init__(self, size: int = WORKER_THREADS) -> None:
        if size < 1:
            raise ValueError("at least one worker thread is needed")
        self.size = size
        self._executor = ThreadPoolExecutor(size, thread_name_prefix=THREAD_NAME_PREFIX)

    async def run(self, func: Callable[[], _T], timeout: float) -> _T:
        """`func()` in a worker thread, or RequestTimeout after `timeout` seconds."""
        future = self._executor.submit(contextvars.copy_context().run, func)
        try:
            # asyncio's own timeout: anyio's cancel scope cost more than the hand-off itself.
            async with asyncio.timeout(timeout):
                return await asyncio.wrap_future(future)
        except TimeoutError:
            if future.cancel():  # still queued: it never runs
                log.warning("no worker thread free within %.1fs (%d busy)", timeout, self.size)
                raise RequestTimeout("Server busy") from None
            log.warning("request timed out after %.1fs; its thread finishes on its own", timeout)
            raise RequestTimeout("Request timed out") from None

    def close(self) -> None:
        """Stop taking work; queued calls are dropped, running ones finish on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)
