"""The MCP 2025-11-25 adapter at the stdio edge.

`connection.DualEraConnection` routes each message: modern `_meta` goes to the stateless core
untouched; an `initialize` without it starts a legacy session (`session`), whose requests are
translated (`translate`, pure) and whose confirmation forms become server-initiated requests
(`channel`). Nothing in `protocol/`, `tools/` or `store/` imports this package.
"""
