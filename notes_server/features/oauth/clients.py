"""A client as Authlib's grants see it, and the redirect URI rules.

Redirect URIs match exactly (scheme, host, port, path and query, byte for byte), with one
exception from RFC 8252 section 7.3: a registered loopback redirect (`http://127.0.0.1`,
`http://[::1]` or `http://localhost`) matches the same URI on any port, since a native app
listens on whatever port it got. A redirect URI may carry no fragment; a non-loopback one must
be https (or a private-use scheme, for native apps).
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import ClientMixin

from notes_server.features.oauth.secrets import digest
from notes_server.store.oauth import ClientRecord

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "[::1]", "localhost"})
GRANT_TYPES = ("authorization_code", "refresh_token")
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
MAX_REDIRECT_URIS = 10
MAX_URI = 2048


def _loopback_parts(uri: str) -> tuple[str, str, str] | None:
    """(host, path, query) of an http loopback URI, else None."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        return None
    if parts.scheme != "http" or "@" in parts.netloc:
        return None
    name = parts.hostname or ""
    shown = f"[{name}]" if ":" in name else name
    if shown not in LOOPBACK_HOSTS:
        return None
    return shown, parts.path, parts.query


def redirect_matches(registered: str, requested: str) -> bool:
    if registered == requested:
        return True
    mine, theirs = _loopback_parts(registered), _loopback_parts(requested)
    return mine is not None and mine == theirs


def redirect_problem(uri: object) -> str | None:
    """Why `uri` cannot be registered as a redirect URI, or None."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI:
        return "must be a URI of at most 2048 characters"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "is not a URI"
    if parts.fragment or "#" in uri:
        return "must not have a fragment"
    if not parts.scheme:
        return "must be absolute"
    if parts.scheme == "https":
        return None if parts.hostname else "has no host"
    if parts.scheme == "http":
        return None if _loopback_parts(uri) is not None else "http is allowed only for loopback"
    if parts.scheme in ("javascript", "data", "file", "vbscript"):
        return "has a forbidden scheme"
    # A private-use scheme of a native app (RFC 8252 section 7.1): reverse domain name.
    return None if "." in parts.scheme else "a private-use scheme must be a reverse domain name"


class OAuthClient(ClientMixin):  # type: ignore[misc]
    """Authlib's view of one client row."""

    def __init__(self, record: ClientRecord) -> None:
        self.record = record

    @property
    def client_id(self) -> str:
        return self.record.client_id

    @property
    def name(self) -> str:
        name = self.record.metadata.get("client_name") or self.record.name
        return name if isinstance(name, str) and name.strip() else self.record.client_id

    @property
    def auth_method(self) -> str:
        method = self.record.metadata.get("token_endpoint_auth_method", "none")
        return method if isinstance(method, str) else "none"

    def get_client_id(self) -> str:
        return self.record.client_id

    def get_default_redirect_uri(self) -> str | None:
        return None  # OAuth 2.1: the request must name its redirect URI

    def get_allowed_scope(self, scope: Any) -> str:
        return ""  # access is per consented workspace, not per scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(redirect_matches(uri, redirect_uri) for uri in self.record.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        stored = self.record.secret_hash
        return stored is not None and hmac.compare_digest(stored, digest(client_secret))

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        allowed = self.record.metadata.get("grant_types", list(GRANT_TYPES))
        return grant_type in GRANT_TYPES and isinstance(allowed, list) and grant_type in allowed
