"""The checks every HTTP request passes, each used by the `/mcp` chain and by Starlette alike."""
