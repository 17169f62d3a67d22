"""The `io.modelcontextprotocol/tasks` extension: long tool calls as durable, polled tasks."""
