"""Client ID Metadata Documents: a `client_id` that is an https URL names its own metadata.

The fetch is an SSRF surface (any client makes the server fetch any URL), so it is narrow:

- https only, on port 443 (the only port the sandbox opens for it); no user-info, no fragment;
- the host is resolved once and every address must be global unicast: loopback, private,
  link-local (cloud metadata at 169.254.169.254 included), CGNAT, multicast, reserved and
  unspecified ones are refused, then the connection goes to the address that was checked
  (no second lookup a DNS rebinding could answer differently), with TLS verified for the name;
- no redirects at all; `MAX_BYTES` of body and `TIMEOUT_S` for the whole fetch;
- the document must be a JSON object whose `client_id` equals the URL exactly, with
  redirect URIs that pass `clients.redirect_problem`, and a public client's
  `token_endpoint_auth_method` (`none`).

`allow_dev_addresses` (operator flag `--oauth-dev-addresses`) lets loopback and private
addresses through, and plain http to them, for a document served on the developer's machine.
The result is cached in the database per the response's Cache-Control `max-age` (bounded
by `MIN_CACHE` and `MAX_CACHE`; `no-store`/`no-cache` keep `MIN_CACHE`).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from notes_server.features.oauth.clients import MAX_REDIRECT_URIS, MAX_URI, redirect_problem

MAX_BYTES = 32 * 1024
TIMEOUT_S = 5.0
MIN_CACHE = timedelta(minutes=1)
MAX_CACHE = timedelta(days=1)
DEFAULT_CACHE = timedelta(hours=1)
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)

Resolver = Callable[[str, int], list[str]]


class MetadataRefused(Exception):
    """The document cannot be used; the message is for the log and the error page."""


@dataclass(frozen=True)
class Fetched:
    metadata: dict[str, Any]
    cache_for: timedelta


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith("https://") or client_id.startswith("http://")


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def address_allowed(address: str, *, allow_dev: bool) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return False
    if ip.is_global:
        return True
    return allow_dev and (ip.is_loopback or ip.is_private)


def cache_lifetime(cache_control: str | None) -> timedelta:
    if cache_control is None:
        return DEFAULT_CACHE
    lowered = cache_control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return MIN_CACHE
    found = _MAX_AGE.search(cache_control)
    if found is None:
        return DEFAULT_CACHE
    return min(MAX_CACHE, max(MIN_CACHE, timedelta(seconds=int(found.group(1)))))


class _PinnedHttps(http.client.HTTPSConnection):
    """HTTPS to an address already checked, TLS verified against the URL's host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class MetadataFetcher:
    def __init__(
        self,
        *,
        allow_dev_addresses: bool = False,
        resolver: Resolver = system_resolver,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.allow_dev = allow_dev_addresses
        self.resolver = resolver
        self.timeout_s = timeout_s

    def fetch(self, url: str) -> Fetched:
        parts = self._checked_url(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = self.resolver(host, port)
        except OSError:
            raise MetadataRefused("the client_id host does not resolve") from None
        if not addresses or not all(
            address_allowed(a, allow_dev=self.allow_dev) for a in addresses
        ):
            raise MetadataRefused("the client_id host is not a public address")
        if parts.scheme == "http" and not all(
            ipaddress.ip_address(a).is_loopback or ipaddress.ip_address(a).is_private
            for a in addresses
        ):
            raise MetadataRefused("a client_id URL must be https")
        body, cache_control = self._get(parts, host, port, addresses[0])
        return Fetched(self._checked_document(url, body), cache_lifetime(cache_control))

    def _checked_url(self, url: str) -> Any:
        if len(url) > MAX_URI:
            raise MetadataRefused("the client_id URL is too long")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (raises on a malformed port)
        except ValueError:
            raise MetadataRefused("the client_id is not a valid URL") from None
        if parts.scheme != "https" and not (parts.scheme == "http" and self.allow_dev):
            raise MetadataRefused("a client_id URL must be https")
        if not parts.hostname or "@" in parts.netloc or parts.fragment or "#" in url:
            raise MetadataRefused("the client_id URL must have a host and no user or fragment")
        if not self.allow_dev and parts.port not in (None, 443):
            raise MetadataRefused("a client_id URL must use port 443")
        if not parts.path or parts.path == "/":
            raise MetadataRefused("the client_id URL must have a path")
        return parts

    def _get(self, parts: Any, host: str, port: int, address: str) -> tuple[bytes, str | None]:
        deadline = time.monotonic() + self.timeout_s
        kind = _PinnedHttps if parts.scheme == "https" else _PinnedHttp
        connection = kind(host, port, address, self.timeout_s)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("GET", target, headers={"Accept": "application/json"})
            response = connection.getresponse()
            if 300 <= response.status < 400:
                raise MetadataRefused("the client_id URL redirects (not followed)")
            if response.status != 200:
                raise MetadataRefused(f"the client_id URL answered HTTP {response.status}")
            length = response.getheader("content-length")
            if length is not None and (not length.isdigit() or int(length) > MAX_BYTES):
                raise MetadataRefused("the client metadata document is too large")
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise MetadataRefused("the client metadata document took too long")
                chunk = response.read1(8192)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BYTES:
                    raise MetadataRefused("the client metadata document is too large")
                chunks.append(chunk)
            return b"".join(chunks), response.getheader("cache-control")
        except (OSError, http.client.HTTPException, ssl.SSLError):
            raise MetadataRefused("the client metadata document could not be fetched") from None
        finally:
            connection.close()

    @staticmethod
    def _checked_document(url: str, body: bytes) -> dict[str, Any]:
        try:
            document = json.loads(body)
        except ValueError:
            raise MetadataRefused("the client metadata document is not JSON") from None
        if not isinstance(document, dict):
            raise MetadataRefused("the client metadata document is not a JSON object")
        if document.get("client_id") != url:
            raise MetadataRefused("the document's client_id differs from its URL")
        uris = document.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
            raise MetadataRefused("the document needs 1 to 10 redirect_uris")
        for uri in uris:
            if redirect_problem(uri) is not None:
                raise MetadataRefused("the document has an unusable redirect URI")
        if document.get("token_endpoint_auth_method", "none") != "none":
            raise MetadataRefused("only public clients (token_endpoint_auth_method none)")
        name = document.get("client_name")
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise MetadataRefused("the document's client_name is unusable")
        return {
            "client_id": url,
            "client_name": name,
            "redirect_uris": uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }
