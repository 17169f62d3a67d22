"""`notifications/progress` for a request that carries `_meta.progressToken`.

A tool reports through `CallContext.report_progress`; the transport decides where the
notification goes (stdio: a line before the reply; HTTP: an event on the request's SSE response).
Here the rules that hold for every transport: only for a valid token (a string or an integer),
`progress` strictly increasing and finite, at most one notification per MIN_INTERVAL_S except
the one that reaches the total, at most MAX_NOTIFICATIONS per request. A failure to deliver is
logged and ignored: progress is advisory and must never fail the call.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from notes_server.jsontext import dump_bytes
from notes_server.tools.base import ProgressSink

log = logging.getLogger("notes_server.protocol")

PROGRESS_TOKEN = "progressToken"
MIN_INTERVAL_S = 0.02
MAX_NOTIFICATIONS = 1000
MAX_MESSAGE = 500
Emit = Callable[[bytes], None]


def progress_token(params: dict[str, Any]) -> str | int | None:
    """The request's progress token, or None when it asked for none (or sent a bad one)."""
    meta = params.get("_meta")
    token = meta.get(PROGRESS_TOKEN) if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        return None
    return token


def progress_sink(params: dict[str, Any], emit: Emit | None) -> ProgressSink | None:
    """A sink that writes this request's notifications through `emit`; None without a token."""
    token = progress_token(params)
    if token is None or emit is None:
        return None
    return _Reporter(token, emit)


class _Reporter:
    def __init__(self, token: str | int, emit: Emit) -> None:
        self.token = token
        self.emit = emit
        self.last: float | None = None
        self.last_at = 0.0
        self.sent = 0

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if not self._worth_sending(progress, total):
            return
        params: dict[str, Any] = {"progressToken": self.token, "progress": progress}
        if total is not None and math.isfinite(total):
            params["total"] = total
        if message:
            params["message"] = message[:MAX_MESSAGE]
        notice = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        self.last, self.last_at, self.sent = progress, time.monotonic(), self.sent + 1
        try:
            self.emit(dump_bytes(notice))
        except Exception as exc:  # advisory: the call goes on, its reply reports any real fault
            log.info("a progress notification could not be delivered: %s", type(exc).__name__)

    def _worth_sending(self, progress: float, total: float | None) -> bool:
        if not math.isfinite(progress) or self.sent >= MAX_NOTIFICATIONS:
            return False
        if self.last is not None and progress <= self.last:
            return False
        final = total is not None and progress >= total
        return final or time.monotonic() - self.last_at >= MIN_INTERVAL_S
