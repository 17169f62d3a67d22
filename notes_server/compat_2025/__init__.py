"""The MCP 2025-11-25 adapter at the edges (stdio connections and HTTP sessions).

On stdio, `connection.DualEraConnection` routes each message: modern `_meta` goes to the
stateless core untouched; an `initialize` without it starts a legacy session (`session`), whose
requests are translated (`translate`, pure) and whose confirmation forms become server-initiated
requests asked on the connection (`channel`). Over HTTP, `http` keeps sessions in the database
(`http_sessions`) and `http_stream` asks on the SSE stream of the POST. Both run the one rounds
loop (`rounds.call_rounds`), each with its own thin driver. A client's
roots narrow what its session may touch (`roots`). Nothing in `protocol/`, `tools/`,
`store/` or `transports/` imports this package.
"""
