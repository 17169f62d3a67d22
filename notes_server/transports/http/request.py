"""One `/mcp` request as the handler's checks see it: its head read once, in one pass.

`McpPostHandler` builds no Starlette `Request`: the few headers the checks and the era choice
read are collected from the raw ASGI list into `McpRequest`, and each check of the chain reads
and completes it (the principal, the Origin to answer with CORS headers, the body).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import Receive, Scope

# The request headers the chain reads, by their raw (lower-case) ASGI names.
WANTED = frozenset(
    {
        b"host",
        b"origin",
        b"authorization",
        b"accept",
        b"content-type",
        b"content-length",
        b"access-control-request-method",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
    }
)
_NONE: list[str] = []


class McpRequest:
    """The head of one request to `/mcp` and what the checks learned about it."""

    __slots__ = (
        "_headers",
        "body",
        "cors_origin",
        "method",
        "principal",
        "receive",
        "scope",
        "values",
    )

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self.receive = receive
        self.method: str = scope["method"]
        found: dict[bytes, list[str]] = {}
        for name, value in scope["headers"]:
            if name in WANTED:
                found.setdefault(name, []).append(value.decode("latin-1"))
        #: The values of each wanted header, in order, as Starlette decodes them.
        self.values = found
        #: Set by the auth check; every later step runs only with one.
        self.principal = ""
        #: Set by the CORS check: the allowed Origin whose answer carries CORS headers.
        self.cors_origin: str | None = None
        #: Set by the limits check (POST): the whole body, read once.
        self.body = b""
        self._headers: Headers | None = None

    def all(self, name: bytes) -> list[str]:
        return self.values.get(name, _NONE)

    def first(self, name: bytes, default: str = "") -> str:
        found = self.values.get(name)
        return default if found is None else found[0]

    def has(self, name: bytes) -> bool:
        return name in self.values

    @property
    def headers(self) -> Headers:
        """Every header, for the 2025 session handler (it reads the session and version)."""
        if self._headers is None:
            self._headers = Headers(scope=self.scope)
        return self._headers
