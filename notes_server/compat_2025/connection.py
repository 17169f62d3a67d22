"""A dual-era stdio connection: stateless 2026-07-28 plus 2025-11-25 sessions at the edge.

Routing is per message (digest §12 item 2):
- a request whose `params._meta` names a protocol version is modern and handled exactly as by
  the stateless transport, even after a legacy `initialize` (so `initialize` with modern `_meta`
  stays -32601);
- `initialize` without it starts (or restarts) a legacy session on this connection;
- other requests without it are translated by that session, or refused with -32602 before one;
- notifications are never answered; in a legacy session whose client declared `roots`,
  `notifications/initialized` and `.../roots/list_changed` make the server ask `roots/list`
  at once (the answer narrows what the session may touch; `compat_2025.roots`); the wait for the
  answer is bounded (`roots_wait_s`), then the question is cancelled and nothing is usable;
- in a legacy session, a response to a server-initiated request we stopped waiting for is
  dropped silently (before one, a response is an invalid request, as in the stateless core).

Frames that arrive while the session waits for the client's answer to a server-initiated
request are queued on the reader (`LineReader.deferred`; see `notes_server.compat_2025.channel`)
and handed back by the transport, in order, before the next line is read, each through the
transport's one guard.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from notes_server.compat_2025.constants import NOT_INITIALIZED, ROOTS_CHANGED, ROOTS_WAIT_S
from notes_server.errors import InvalidParams, McpError, to_wire
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    decode,
    encode_error,
    encode_result,
    parse_json,
)
from notes_server.protocol.meta import names_version
from notes_server.protocol.progress import progress_sink
from notes_server.transports.stdio import (
    Frame,
    LineReader,
    LineWriter,
    Oversized,
    StdioStreams,
    answer,
)

if TYPE_CHECKING:
    from notes_server.compat_2025.channel import ClientChannel
    from notes_server.compat_2025.roots import GrantLookup
    from notes_server.compat_2025.session import LegacyHandler, Outcome
    from notes_server.compat_2025.subscriptions import SessionSubscriptions
    from notes_server.protocol.server import McpServer

# The session machinery (session, channel, rounds, roots, translate) is imported at the first
# frame without a modern `_meta`: a 2026-07-28 client never needs it, and importing it before
# the first reply cost 13M of a 386M-instruction cold start (callgrind, 2026-12-02: 3.4%; in a
# checkout without bytecode caches it was compiled from source after the sandbox was on: 18 ms
# of a 196 ms start under pyinstrument).

log = logging.getLogger("notes_server.legacy")


class DualEraConnection:
    """The `Connection` that `notes-server serve` uses on stdio. `roots_wait_s` bounds the wait
    for a client's `roots/list` answer (None: `compat_2025.roots.ROOTS_WAIT_S`)."""

    def __init__(
        self,
        server: McpServer,
        principal: str,
        reader: LineReader,
        writer: LineWriter,
        grants: GrantLookup | None = None,
        roots_wait_s: float | None = None,
    ) -> None:
        self.server = server
        self.grants = grants
        self.roots_wait_s = ROOTS_WAIT_S if roots_wait_s is None else roots_wait_s
        self.principal = principal
        self.writer = writer
        self.reader = reader
        self._channel: ClientChannel | None = None
        self.legacy: LegacyHandler | None = None
        self.streams = StdioStreams(server, principal, writer)
        self.subscriptions: SessionSubscriptions | None = None

    def close(self) -> None:
        """EOF: every open listen (and session subscription) ends."""
        if self.subscriptions is not None:
            self.subscriptions.close()
        self.streams.close()

    @property
    def channel(self) -> ClientChannel:
        """The channel a legacy session asks the client through, made at its first use."""
        if self._channel is None:
            from notes_server.compat_2025.channel import ClientChannel

            self._channel = ClientChannel(self.reader, self.writer, self.reader.deferred)
        return self._channel

    def receive(self, frame: Frame) -> None:
        """Answer one frame (the transport guards it: a failure is -32603 for it alone)."""
        reply = self._reply(frame)
        if reply is not None:
            self.writer.write(reply)

    def _reply(self, frame: Frame) -> bytes | None:
        if isinstance(frame, Oversized):
            return answer(self.server, self.principal, frame)
        try:
            message = decode(frame)
        except DecodeFailure as failure:
            if self.legacy is not None and _is_response(frame):
                log.info("dropped a response to an unknown or abandoned request")
                return None
            return encode_error(failure.request_id, to_wire(failure.error))
        # A listen is a 2026-07-28 request; a session's frame of that name is not one.
        if (
            isinstance(message, Notification) or names_version(message.params)
        ) and self.streams.take(message):
            return None
        if isinstance(message, Notification):
            if self.legacy is not None and message.method in ROOTS_CHANGED:
                self.legacy.refresh_roots()
            self.server.handle_notification(message)
            return None
        if names_version(message.params):  # modern: the stateless core, untouched
            progress = progress_sink(message.params, self.writer.write)
            result, error = self.server.handle_request(
                message, self.principal, progress=progress, notify=self.writer.write
            )
        else:
            from notes_server.compat_2025.channel import RequestCancelled

            try:
                result, error = self._route(message)
            except RequestCancelled:
                log.info("request %r cancelled by the client; not answered", message.id)
                return None
        if error is not None:
            return encode_error(message.id, error)
        assert result is not None
        return encode_result(message.id, result)

    def _route(self, request: Request) -> Outcome:
        """A request without a modern `_meta`: `initialize`, or a legacy session's."""
        if request.method == "initialize":
            return self._initialize(request)
        if self.legacy is None:
            return None, to_wire(InvalidParams(NOT_INITIALIZED))
        return self.legacy.handle(request)

    def _initialize(self, request: Request) -> Outcome:
        from notes_server.compat_2025.session import LegacyHandler, start_session
        from notes_server.compat_2025.subscriptions import SessionSubscriptions, session_hub

        try:
            session = start_session(request.params)
        except McpError as exc:
            return None, to_wire(exc)
        if self.subscriptions is not None:
            self.subscriptions.close()  # a new initialize starts a new session
            self.subscriptions = None
        listen = session_hub(self.server)
        if listen is not None:
            self.subscriptions = SessionSubscriptions(
                listen, self.principal, lambda stream: self.streams.adopt("session", stream)
            )
        handler = LegacyHandler(
            self.server,
            self.principal,
            session,
            self.channel,
            self.grants,
            self.roots_wait_s,
            subscriptions=self.subscriptions,
        )
        result, error = handler.initialize(request.id)
        if error is None:
            self.legacy = handler
        return result, error


def _is_response(frame: bytes) -> bool:
    from notes_server.compat_2025.translate import is_response

    try:
        message: Any = parse_json(frame)
    except DecodeFailure:
        return False
    return is_response(message)
