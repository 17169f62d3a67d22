"""notes-server: a stateless MCP notes server."""

__version__ = "0.1.0"
