"""`notifications/message` for a request that asked for log messages.

2026-07-28: a request opts in with `_meta["io.modelcontextprotocol/logLevel"]`; without it the
server MUST NOT send any for that request, and they go only on that request's own stream
(stdio: lines before the reply; HTTP: its SSE response). A 2025-11-25 session's
`logging/setLevel` reaches the core the same way: the adapter stamps the session's level into
each request's `_meta`. An unknown level is -32602 (the spec's SHOULD).

The rules every transport shares live here: only messages at or above the requested level, at
most MAX_MESSAGES per request, strings cut to MAX_TEXT; a failure to deliver is logged and
ignored (a log message must never fail the call).
"""

from __future__ import annotations

import logging
from typing import Any

from notes_server.errors import InvalidParams
from notes_server.jsontext import dump_bytes
from notes_server.protocol.progress import Emit
from notes_server.protocol.versions import META_LOG_LEVEL
from notes_server.tools.base import LogSink

log = logging.getLogger("notes_server.protocol")

# RFC 5424 severities, least severe first (the spec's LoggingLevel).
LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
RANK = {level: rank for rank, level in enumerate(LEVELS)}
MAX_MESSAGES = 200
MAX_TEXT = 1000
MAX_LOGGER = 64


def check_level(value: object, where: str) -> str:
    """A valid LoggingLevel, or -32602 naming the valid ones."""
    if not isinstance(value, str) or value not in RANK:
        raise InvalidParams(f"Invalid params: {where} must be one of {', '.join(LEVELS)}")
    return value


def requested_level(params: dict[str, Any]) -> str | None:
    """The level this request asked for; None when it asked for no log messages."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_LOG_LEVEL not in meta:
        return None
    return check_level(meta[META_LOG_LEVEL], f"_meta[{META_LOG_LEVEL!r}]")


def log_sink(level: str | None, emit: Emit | None) -> LogSink | None:
    """A sink writing this request's messages through `emit`; None when none may be sent."""
    if level is None or emit is None:
        return None
    return _Messages(RANK[level], emit)


class _Messages:
    def __init__(self, threshold: int, emit: Emit) -> None:
        self.threshold = threshold
        self.emit = emit
        self.sent = 0

    def __call__(self, level: str, data: Any, logger: str) -> None:
        rank = RANK.get(level)
        if rank is None or rank < self.threshold or self.sent >= MAX_MESSAGES:
            return
        if isinstance(data, str):
            data = data[:MAX_TEXT]
        params = {"level": level, "logger": logger[:MAX_LOGGER], "data": data}
        notice = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        self.sent += 1
        try:
            self.emit(dump_bytes(notice))
        except Exception as exc:  # advisory, like progress: the call goes on
            log.info("a log notification could not be delivered: %s", type(exc).__name__)
