"""Streamable HTTP: one handler for `/mcp` (`endpoint`), Starlette beside it for every other
route (`app`)."""
