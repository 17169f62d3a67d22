"""The frozen facts about one request that every handler may use."""

from __future__ import annotations

from typing import Any, NamedTuple

from notes_server.protocol.envelope import RequestId
from notes_server.security.uri import WorkspaceUri
from notes_server.tools.base import LogSink, ProgressSink


class RequestContext(NamedTuple):
    """Immutable; a NamedTuple, which is cheaper per request than a frozen dataclass and
    compiles nothing at start."""

    request_id: RequestId
    method: str
    principal: str
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    roots: tuple[WorkspaceUri, ...] | None = None
    progress: ProgressSink | None = None
    log: LogSink | None = None
