"""Origin and Host validation for every HTTP request, before anything else runs.

A browser page on any site can POST to `http://127.0.0.1:PORT`; and through DNS rebinding a
hostile name can resolve to 127.0.0.1 so the browser even considers it same-origin. Two checks
stop both: a present `Origin` must be allowed (loopback origins for a loopback bind, plus any
configured with `--allow-origin`), and for a loopback bind the `Host` must name the loopback
interface. A refused request gets 403 and learns nothing about the server. This is the first
check after the error middleware: nothing else (CORS, authentication) runs for a refused request.

A route that serves its own HTML forms (the purge approval page) is reached only from its own
origin: there an `Origin` whose host[:port] is exactly the request's `Host` passes without
`--allow-origin` (the scheme may differ behind a TLS proxy), and every other `Origin` is
refused, other loopback origins and `--allow-origin` ones included (those may call `/mcp`, not
sign a person in). A rebound name would be a different site to the browser, which keeps the
page's SameSite=Strict session cookie from it.

An open path (`http_cors`: the OAuth metadata, token, revocation and registration endpoints)
takes any `Origin`: it is public, uses no cookie, and answers only to what the request carries
(a code with its PKCE verifier, a refresh token, client metadata). A page elsewhere can do
there what any OAuth client can (on a loopback bind this lets pages in the person's browser
reach them): read the metadata, register (rate-limited), and exchange or revoke only what a
consent gave it. Nothing signs a person in there. The `Host` check stays.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from notes_server.config import HttpSettings
from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import error_response

# RFC 9110 Host / RFC 6454 Origin, strictly: a reg-name or IPv4 (letters, digits, dots,
# hyphens) or a bracketed IPv6 literal, then at most an ASCII port. No userinfo, no path, no
# list, no spaces: anything else is refused rather than half-parsed.
_HOST = r"(?P<host>[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]{1,5}))?"
_HOST_VALUE = re.compile(_HOST)
SAME_ORIGIN_KEY = "notes_same_origin_form"
_ORIGIN_VALUE = re.compile(r"(?P<scheme>https?)://" + _HOST + "/?")


@functools.lru_cache(maxsize=64)  # a few distinct Host values: parsed once each
def is_loopback_name(host: str) -> bool:
    """`localhost`, or an IPv4 / bracketed IPv6 loopback literal (as a Host header spells it)."""
    if host == "localhost":
        return True
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(literal)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 4) == (literal == host)


def _parsed(pattern: re.Pattern[str], value: str) -> str | None:
    """The lower-cased host of a strictly well-formed value, or None."""
    match = pattern.fullmatch(value.lower())
    if match is None:
        return None
    port = match.group("port")
    if port is not None and int(port) > 65535:
        return None
    return match.group("host")


def host_name(value: str) -> str | None:
    """The host part of a `Host` header value (`name`, `name:port`, `[v6]:port`), or None
    when the value is anything else (a list, a userinfo, a suffix after the port...)."""
    return _parsed(_HOST_VALUE, value)


def origin_host(value: str) -> str | None:
    """The host of an `Origin` that is exactly `http(s)://host[:port]`, or None."""
    return _parsed(_ORIGIN_VALUE, value)


def same_origin(origin: str, hosts: Sequence[str]) -> bool:
    """The `Origin` names exactly the one `Host` this request was sent to (host and port)."""
    if len(hosts) != 1 or origin_host(origin) is None or host_name(hosts[0]) is None:
        return False
    authority = origin.lower().rstrip("/").split("://", 1)[1]
    return authority == hosts[0].strip().lower()


class OriginPolicy:
    """Whether an `Origin` may call: configured with `--allow-origin`, or loopback on a loopback
    bind. Shared by the guard (403) and CORS (which origins get CORS headers)."""

    def __init__(self, http: HttpSettings) -> None:
        self.loopback = http.loopback
        self.origins = {origin.lower().rstrip("/") for origin in http.allowed_origins}

    def __call__(self, origin: str) -> bool:
        host = origin_host(origin)
        if host is None:
            return False
        if origin.lower().rstrip("/") in self.origins:
            return True
        return self.loopback and is_loopback_name(host)


class HostOriginCheck:
    """The guard's verdict from the `Host` and `Origin` values alone, so that the middleware
    (Starlette's routes) and the `/mcp` chain (`GuardCheck`) judge exactly alike."""

    def __init__(self, http: HttpSettings) -> None:
        self.loopback = http.loopback
        self.origin_allowed = OriginPolicy(http)
        public = urlsplit(http.public_url or "").hostname
        self.public_host = public.lower() if public else None

    def problem(
        self,
        hosts: Sequence[str],
        origins: Sequence[str],
        own_forms: bool = False,
        any_origin: bool = False,
    ) -> str | None:
        """Why the request is refused (403), or None; `own_forms`: the path serves its own
        HTML forms, so an Origin must name exactly this request's Host, and nothing else
        passes there; `any_origin`: an open path, where no Origin is refused."""
        if self.loopback and not self.host_allowed(hosts):
            return "Forbidden: Host not allowed"
        if not origins or any_origin:
            return None
        if own_forms:
            if len(origins) == 1 and same_origin(origins[0], hosts):
                return None
            return "Forbidden: Origin not allowed"
        if len(origins) > 1 or not self.origin_allowed(origins[0]):
            return "Forbidden: Origin not allowed"
        return None

    def host_allowed(self, values: Sequence[str]) -> bool:
        if len(values) != 1:
            return False
        name = host_name(values[0])
        if name is None:
            return False
        return is_loopback_name(name) or (name.strip("[]") == self.public_host)


class OriginHostGuard:
    def __init__(
        self,
        app: ASGIApp,
        http: HttpSettings,
        same_origin_paths: frozenset[str] = frozenset(),
        open_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.same_origin_paths = same_origin_paths
        self.open_paths = open_paths - same_origin_paths  # a form path never opens up
        self.check = HostOriginCheck(http)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            own_forms = scope["path"] in self.same_origin_paths
            problem = self.check.problem(
                headers.getlist("host"),
                headers.getlist("origin"),
                own_forms,
                any_origin=scope["path"] in self.open_paths,
            )
            if problem is not None:
                await error_response(403, problem)(scope, receive, send)
                return
            origins = headers.getlist("origin")
            if own_forms and origins and same_origin(origins[0], headers.getlist("host")):
                scope[SAME_ORIGIN_KEY] = True  # CORS has nothing to add to a same-origin POST
        await self.app(scope, receive, send)

    def problem(self, headers: Headers, own_forms: bool = False) -> str | None:
        return self.check.problem(headers.getlist("host"), headers.getlist("origin"), own_forms)


# Header values seen to pass a check (a client repeats its own on every request); bounded, so
# that varied values cannot grow it.
_REMEMBERED_MAX = 256


class RememberedValues:
    """Values that passed a check, so the next request with the same ones skips the parsing;
    emptied when full."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: set[object] = set()

    def __contains__(self, values: object) -> bool:
        return values in self.seen

    def add(self, values: object) -> None:
        if len(self.seen) >= _REMEMBERED_MAX:
            self.seen.clear()
        self.seen.add(values)


class GuardCheck:
    """The `/mcp` chain's first check: `HostOriginCheck`, with a lone Host that passed without
    an Origin remembered (every request of a non-browser client)."""

    def __init__(self, http: HttpSettings) -> None:
        self.check = HostOriginCheck(http)
        self.passed = RememberedValues()

    async def __call__(self, request: McpRequest) -> Response | None:
        hosts, origins = request.all(b"host"), request.all(b"origin")
        lone = len(hosts) == 1 and not origins
        if lone and hosts[0] in self.passed:
            return None
        problem = self.check.problem(hosts, origins)
        if problem is not None:
            return error_response(403, problem)
        if lone:
            self.passed.add(hosts[0])
        return None
