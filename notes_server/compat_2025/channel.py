"""Server-initiated requests on a stdio connection (2025-11-25 only).

`ClientChannel.ask` writes one request and reads stdin until the client's response with that id
arrives, or until an optional bound passes (`Unanswered`; the caller decides what a silent
client means). What arrives meanwhile:
- a legacy `ping` request is answered at once (`{}`);
- `notifications/cancelled` for the request being served raises `RequestCancelled`;
- a response with another id is stale (e.g. to a request we gave up on) and is dropped;
- everything else (requests, other notifications, even unparseable lines) is queued in the
  connection's backlog and handled, in arrival order, after the current request completes.
"""

from __future__ import annotations

import itertools
import json
import logging
import select
import time
from collections import deque
from typing import Any

from notes_server.compat_2025.translate import is_modern, is_response
from notes_server.protocol.envelope import (
    DecodeFailure,
    Request,
    RequestId,
    decode,
    encode_result,
    parse_json,
)
from notes_server.transports.stdio import Frame, LineReader, LineWriter, Oversized

log = logging.getLogger("notes_server.legacy")


class RequestCancelled(Exception):
    """The client cancelled the request this server was asking about."""


class Unanswered(Exception):
    """The client did not answer in the time `ask` was given; its answer, if it ever comes,
    has an id nobody waits for and is dropped."""


def dump(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


def same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


class ClientChannel:
    def __init__(self, reader: LineReader, writer: LineWriter, backlog: deque[Frame]) -> None:
        self.reader = reader
        self.writer = writer
        self.backlog = backlog
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"s-{next(self._ids)}"

    def ask(
        self,
        message: dict[str, Any],
        serving: RequestId | None,
        wait_s: float | None = None,
    ) -> dict[str, Any] | None:
        """Send `message` (a request with an id) and return the client's response object;
        None when stdin ends first. Raises RequestCancelled if `serving` is cancelled (None:
        asked for the session, not for a request, as `roots/list` is), and Unanswered when
        `wait_s` seconds pass first (None: wait as long as it takes, as for a person)."""
        self.writer.write(dump(message))
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            if deadline is not None:
                # Checked before every frame: a client that keeps talking cannot stretch it.
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._readable(remaining):
                    raise Unanswered
            frame = self.reader.next_frame()
            if frame is None:
                return None
            response = self._sort(frame, message["id"], serving)
            if response is not None:
                return response

    def idle(self, seconds: float, serving: RequestId) -> None:
        """Wait up to `seconds` while still listening to the client: a frame that arrives is
        sorted as during `ask` (ping answered, a cancellation of `serving` raises
        RequestCancelled, the rest queued) and ends the wait early; so does the end of stdin,
        which counts as a cancellation."""
        if self.reader.fileno() is None:
            time.sleep(seconds)
            return
        if not self._readable(seconds):
            return
        frame = self.reader.next_frame()
        if frame is None:
            raise RequestCancelled
        self._sort(frame, "", serving)

    def _readable(self, seconds: float) -> bool:
        """Whether a frame (or the end of stdin) can be read within `seconds`. Bytes read ahead
        into the stream's buffer count, since the descriptor no longer shows them. A stream
        without a descriptor cannot be waited on with a timeout: it is read as it comes. A
        frame is expected to arrive whole (one line) once its first byte has."""
        fileno = self.reader.fileno()
        if fileno is None or self.reader.read_ahead():
            return True
        ready, _, _ = select.select([fileno], [], [], seconds)
        return bool(ready)

    def cancel(self, request_id: str, reason: str) -> None:
        """Tell the client we no longer need the answer to `request_id`."""
        params = {"requestId": request_id, "reason": reason}
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        self.writer.write(dump(notice))

    def _sort(self, frame: Frame, awaited: str, serving: RequestId | None) -> dict[str, Any] | None:
        if isinstance(frame, Oversized):
            self.backlog.append(frame)
            return None
        try:
            message = parse_json(frame)
        except DecodeFailure:
            self.backlog.append(frame)
            return None
        if is_response(message):
            if same_id(message["id"], awaited):
                return message
            log.info("dropped a response to an unknown or abandoned request")
            return None
        if _cancels(message, serving):
            raise RequestCancelled
        if not self._answer_ping(frame):
            self.backlog.append(frame)
        return None

    def _answer_ping(self, frame: bytes) -> bool:
        try:
            request = decode(frame)
        except DecodeFailure:
            return False
        if not isinstance(request, Request) or request.method != "ping":
            return False
        if is_modern(request.params):
            return False
        self.writer.write(encode_result(request.id, {}))
        return True


def _cancels(message: Any, serving: RequestId | None) -> bool:
    if serving is None or not isinstance(message, dict) or "id" in message:
        return False
    if message.get("method") != "notifications/cancelled":
        return False
    params = message.get("params")
    return isinstance(params, dict) and same_id(params.get("requestId"), serving)
