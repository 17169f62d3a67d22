"""The frozen facts about one request that every handler may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notes_server.protocol.envelope import RequestId


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: RequestId
    method: str
    principal: str
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
