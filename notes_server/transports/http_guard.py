"""Origin and Host validation for every HTTP request, before anything else runs.

A browser page on any site can POST to `http://127.0.0.1:PORT`; and through DNS rebinding a
hostile name can resolve to 127.0.0.1 so the browser even considers it same-origin. Two checks
stop both: a present `Origin` must be allowed (loopback origins for a loopback bind, plus any
configured with `--allow-origin`), and for a loopback bind the `Host` must name the loopback
interface. A refused request gets 403 and learns nothing about the server.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from notes_server.config import HttpSettings
from notes_server.errors import INVALID_REQUEST


def json_response(
    status: int, payload: object, headers: Mapping[str, str] | None = None
) -> Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return Response(body, status, headers=dict(headers or {}), media_type="application/json")


def error_response(status: int, message: str, *, code: int = INVALID_REQUEST) -> Response:
    """A transport-level refusal as an id-less JSON-RPC error (the request was not read)."""
    error = {"code": code, "message": message}
    return json_response(status, {"jsonrpc": "2.0", "id": None, "error": error})


def is_loopback_name(host: str) -> bool:
    host = host.lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The host part of a `Host` header value (`name`, `name:port`, `[v6]:port`)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class OriginHostGuard:
    def __init__(self, app: ASGIApp, http: HttpSettings) -> None:
        self.app = app
        self.loopback = http.loopback
        self.origins = {origin.lower().rstrip("/") for origin in http.allowed_origins}
        public = urlsplit(http.public_url or "").hostname
        self.public_host = public.lower() if public else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self.problem(Headers(scope=scope))
            if problem is not None:
                await error_response(403, problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def problem(self, headers: Headers) -> str | None:
        if self.loopback and not self.host_allowed(headers.getlist("host")):
            return "Forbidden: Host not allowed"
        origins = headers.getlist("origin")
        if origins and (len(origins) > 1 or not self.origin_allowed(origins[0])):
            return "Forbidden: Origin not allowed"
        return None

    def host_allowed(self, values: list[str]) -> bool:
        if len(values) != 1:
            return False
        name = host_name(values[0])
        return is_loopback_name(name) or (name.strip("[]") == self.public_host)

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if origin in self.origins:
            return True
        if not self.loopback:
            return False
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback_name(parts.hostname or "")
