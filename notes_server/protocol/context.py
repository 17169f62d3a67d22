"""The frozen facts about one request that every handler may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notes_server.protocol.envelope import RequestId
from notes_server.security.uri import WorkspaceUri
from notes_server.tools.base import ProgressSink


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: RequestId
    method: str
    principal: str
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    roots: tuple[WorkspaceUri, ...] | None = None
    progress: ProgressSink | None = None
