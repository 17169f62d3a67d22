"""Protocol revisions this server speaks, and the reserved _meta keys it reads and writes."""

from __future__ import annotations

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST = MODERN_VERSIONS[0]

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
