"""The `notes-server` command line: `main` (the lazy command table) and one module per command
group; `client/` is `call`'s MCP client."""
