"""The few facts of the 2025-11-25 adapter that the stdio connection needs before any session
exists (so that a 2026-07-28 client's start never imports the session machinery)."""

from __future__ import annotations

# Client notifications after which the roots are (re)asked.
ROOTS_CHANGED = frozenset({"notifications/initialized", "notifications/roots/list_changed"})
ROOTS_WAIT_S = 30.0  # a client answers roots/list by itself; no user is involved
NOT_INITIALIZED = (
    "Invalid params: put params._meta with io.modelcontextprotocol/protocolVersion on every "
    "request (MCP 2026-07-28), or send initialize first (MCP 2025-11-25)"
)
