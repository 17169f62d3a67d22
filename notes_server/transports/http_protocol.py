"""uvicorn's h11 protocol with a deadline for the request head (slowloris).

uvicorn bounds the idle time between requests (`timeout_keep_alive`) and the head's size
(`h11_max_incomplete_event_size`), but not the time a client may take to send it: one byte a
second keeps a connection, and a worker's slot, forever. Here a connection that has not
finished a request head within HEADER_TIMEOUT_S of connecting, or of starting the next one, is
closed. Body reads and handlers have their own bounds in `notes_server.transports.http`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
PROTOCOL = "notes_server.transports.http_protocol:HeaderTimeoutH11Protocol"


class HeaderTimeoutH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._arm()  # before: a complete head in `data` is handed to the app right away
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is complete; the body has its own read timeout

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:
            self._head_deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closed a connection that sent no complete request head in time")
            self.transport.close()
