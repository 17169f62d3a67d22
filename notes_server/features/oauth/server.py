"""Authlib's authorization server, wired to this server's database.

Authlib runs the protocol (request validation, PKCE, client authentication, error shapes,
RFC 7009 revocation, RFC 7591 registration); this module supplies what it leaves to the
application: where clients, codes and tokens are kept, and the rules this server adds:

- PKCE is required and only S256 is accepted (`S256Only`);
- a code is spent by one conditional UPDATE; presenting it again revokes its grant (so every
  token issued from it) and answers `invalid_grant`;
- refresh tokens rotate on every use; a spent one presented again revokes its grant;
- the `resource` (RFC 8707) is this server's `/mcp` and nothing else, at both endpoints.

Everything runs in a worker thread (argon2, database); the Starlette routes (`routes`) build
the request objects from a body they already read.
"""

from __future__ import annotations

import itertools
import logging
import secrets as pysecrets
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    InvalidRequestError,
    JsonRequest,
    OAuth2Error,
    OAuth2Payload,
    OAuth2Request,
)
from authlib.oauth2.rfc6749 import grants as authlib_grants
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter

from notes_server.features.oauth import secrets
from notes_server.features.oauth.cimd import MetadataFetcher, MetadataRefused, is_metadata_url
from notes_server.features.oauth.clients import (
    AUTH_METHODS,
    GRANT_TYPES,
    MAX_REDIRECT_URIS,
    OAuthClient,
    redirect_problem,
)
from notes_server.store import oauth as store
from notes_server.tools.services import Services

log = logging.getLogger("notes_server.oauth")

TOKEN_PATH = "/oauth/token"
AUTHORIZE_PATH = "/oauth/authorize"
REVOKE_PATH = "/oauth/revoke"
REGISTER_PATH = "/oauth/register"
METADATA_PATH = "/.well-known/oauth-authorization-server"
PRUNE_EVERY = 100


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707: the `resource` is not this server's."""

    error = "invalid_target"


@dataclass(frozen=True)
class OAuthConfig:
    """What the authorization server needs from the settings."""

    issuer: str  # --public-url, without a trailing slash
    registration: str  # "open" or "off"
    dev_addresses: bool = False  # metadata documents on loopback/private addresses

    @property
    def resource(self) -> str:
        return self.issuer + "/mcp"


def metadata(config: OAuthConfig) -> dict[str, Any]:
    """RFC 8414 Authorization Server Metadata, as MCP clients read it."""
    issuer = config.issuer
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": issuer + AUTHORIZE_PATH,
        "token_endpoint": issuer + TOKEN_PATH,
        "revocation_endpoint": issuer + REVOKE_PATH,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": True,
    }
    if config.registration == "open":
        document["registration_endpoint"] = issuer + REGISTER_PATH
    return document


# -- requests Authlib understands ---------------------------------------------------------------


class FormPayload(OAuth2Payload):  # type: ignore[misc]
    """Query or form parameters, repeated ones kept (Authlib refuses repeated ones itself)."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._datalist: defaultdict[str, list[str]] = defaultdict(list)
        for name, value in pairs:
            self._datalist[name].append(value)
        self._data = {name: values[0] for name, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class FormRequest(OAuth2Request):  # type: ignore[misc]
    def __init__(
        self, method: str, uri: str, headers: Mapping[str, str], pairs: Sequence[tuple[str, str]]
    ) -> None:
        super().__init__(method, uri, headers=dict(headers))
        self.payload = FormPayload(pairs)

    @property
    def args(self) -> dict[str, str]:
        return self.payload.data if self.method == "GET" else {}

    @property
    def form(self) -> dict[str, str]:
        return self.payload.data if self.method == "POST" else {}


class JsonBody:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class JsonBodyRequest(JsonRequest):  # type: ignore[misc]
    def __init__(self, uri: str, headers: Mapping[str, str], data: dict[str, Any]) -> None:
        super().__init__("POST", uri, dict(headers))
        self.payload = JsonBody(data)


@dataclass(frozen=True)
class Incoming:
    """One HTTP request, already read, as the routes hand it over."""

    method: str
    uri: str
    headers: Mapping[str, str]
    pairs: Sequence[tuple[str, str]] = ()
    json: dict[str, Any] | None = None


def form_pairs(body: bytes) -> list[tuple[str, str]] | None:
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None


class AuthlibResponse:
    """An HTTP answer from Authlib; `location` is what its RFC 9207 hook rewrites."""

    def __init__(self, status: int, body: Any, headers: list[tuple[str, str]]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    @property
    def location(self) -> str | None:
        for name, value in self.headers:
            if name.lower() == "location":
                return value
        return None

    @location.setter
    def location(self, value: str) -> None:
        others = [(n, v) for n, v in self.headers if n.lower() != "location"]
        self.headers = [*others, ("Location", value)]


# -- the models Authlib asks for -------------------------------------------------------------------


@dataclass
class IssuedCode:
    """A code claimed at the token endpoint (the AuthorizationCodeMixin Authlib reads)."""

    record: store.CodeRecord

    @property
    def code_challenge(self) -> str:
        return self.record.code_challenge

    @property
    def code_challenge_method(self) -> str:
        return "S256"

    def get_redirect_uri(self) -> str:
        return self.record.redirect_uri

    def get_scope(self) -> str:
        return ""


@dataclass
class KnownToken:
    """A refresh token being rotated, or any token being revoked (Authlib's TokenMixin)."""

    token_hash: str
    kind: str
    grant: store.GrantRecord

    def check_client(self, client: OAuthClient) -> bool:
        return self.grant.client_id == client.client_id

    def get_scope(self) -> str:
        return ""

    def get_user(self) -> str:
        return self.grant.principal


class S256Only(CodeChallenge):  # type: ignore[misc]
    """PKCE required on every authorization request, S256 only (OAuth 2.1, MCP)."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]  # noqa: RUF012  (Authlib's class attribute)

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': PKCE (S256) is required.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Unsupported 'code_challenge_method': only S256 is.")
        super().validate_code_challenge(grant, redirect_uri)


# -- the server ------------------------------------------------------------------------------------


class NotesAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, services: Services, config: OAuthConfig) -> None:
        super().__init__(scopes_supported=None)
        self.services = services
        self.config = config
        self.fetcher = MetadataFetcher(allow_dev_addresses=config.dev_addresses)
        self.saved = itertools.count()
        self.register_token_generator("default", self.bearer_token)
        self.register_grant(CodeGrant, [S256Only(required=True)])
        self.register_grant(RefreshGrant)
        self.register_endpoint(Revocation)
        self.register_endpoint(Registration)
        issuer = config.issuer

        class Issuer(IssuerParameter):  # type: ignore[misc]
            def get_issuer(self) -> str:
                return issuer

        self.register_extension(Issuer())

    @property
    def now(self) -> Callable[[], datetime]:
        return self.services.clock

    def write(self) -> Any:
        from notes_server.store.engine import write_tx

        return write_tx(self.services.engine)

    def read(self) -> Any:
        from notes_server.store.engine import read_tx

        return read_tx(self.services.engine)

    # Authlib's framework hooks ---------------------------------------------------------------

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        if isinstance(request, OAuth2Request):
            return request
        assert isinstance(request, Incoming)
        return FormRequest(request.method, request.uri, request.headers, request.pairs)

    def create_json_request(self, request: Any) -> JsonRequest:
        assert isinstance(request, Incoming)
        return JsonBodyRequest(request.uri, request.headers, request.json or {})

    def handle_response(self, status: int, body: Any, headers: Any) -> AuthlibResponse:
        if isinstance(body, dict):
            body = {key: value for key, value in body.items() if value is not None}
        return AuthlibResponse(status, body, list(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None

    def query_client(self, client_id: str) -> OAuthClient | None:
        if not isinstance(client_id, str) or not client_id or len(client_id) > 2048:
            return None
        with self.read() as conn:
            record = store.get_client(conn, client_id)
        if record is not None and record.revoked_at is not None:
            return None
        if is_metadata_url(client_id):
            cached = record is not None and record.kind == "cimd"
            expires = None if record is None else record.expires_at
            if not cached or expires is None or expires <= self.now():
                record = self.fetch_metadata(client_id)
        return None if record is None else OAuthClient(record)

    def fetch_metadata(self, client_id: str) -> store.ClientRecord | None:
        """Fetch (hardened, `cimd`) and cache a Client ID Metadata Document; None if refused."""
        try:
            fetched = self.fetcher.fetch(client_id)
        except MetadataRefused as exc:
            log.info("client metadata document refused: %s", exc)
            return None
        now = self.now()
        with self.write() as conn:
            current = store.get_client(conn, client_id)
            if current is not None and current.kind != "cimd":
                return None  # an id another kind of client already holds
            store.put_client(
                conn,
                client_id=client_id,
                kind="cimd",
                name=fetched.metadata.get("client_name"),
                secret_hash=None,
                metadata=fetched.metadata,
                now=now,
                expires_at=now + fetched.cache_for,
            )
            record = store.get_client(conn, client_id)
        return None if record is None or record.revoked_at is not None else record

    def bearer_token(
        self,
        grant_type: str,
        client: OAuthClient,
        user: Any = None,
        scope: Any = None,
        expires_in: Any = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": secrets.mint(secrets.ACCESS_PREFIX),
            "expires_in": int(secrets.ACCESS_TTL.total_seconds()),
        }
        if include_refresh_token:
            token["refresh_token"] = secrets.mint(secrets.REFRESH_PREFIX)
        return token

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        source = request.authorization_code or request.refresh_token
        grant_id = source.record.grant_id if isinstance(source, IssuedCode) else source.grant.id
        now = self.now()
        with self.write() as conn:
            if next(self.saved) % PRUNE_EVERY == 0:  # expired codes and tokens, now and then
                store.prune(conn, now)
            store.save_token(
                conn,
                token_hash=secrets.digest(token["access_token"]),
                kind="access",
                grant_id=grant_id,
                now=now,
                expires_at=now + secrets.ACCESS_TTL,
            )
            if "refresh_token" in token:
                store.save_token(
                    conn,
                    token_hash=secrets.digest(token["refresh_token"]),
                    kind="refresh",
                    grant_id=grant_id,
                    now=now,
                    expires_at=now + secrets.REFRESH_TTL,
                )

    # The authorization step (after sign-in and consent) -------------------------------------

    def issue_code(
        self, grant: Any, principal: str, workspaces: Sequence[str], resource: str
    ) -> AuthlibResponse:
        """Record the consent and answer the redirect with a code (Authlib adds state, iss)."""
        grant.consent = (principal, tuple(workspaces), resource)
        answer = self.create_authorization_response(grant.request, principal, grant)
        assert isinstance(answer, AuthlibResponse)
        return answer


def check_resource(config: OAuthConfig, values: Sequence[str]) -> str:
    """The request's RFC 8707 `resource`: absent (this server's `/mcp` then) or exactly it."""
    if len(values) > 1:
        raise InvalidTargetError("Only one 'resource' may be requested.")
    if values and values[0].rstrip("/") != config.resource:
        raise InvalidTargetError("The requested resource is not served here.")
    return config.resource


class CodeGrant(authlib_grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(AUTH_METHODS)  # noqa: RUF012  (Authlib's attribute)
    server: NotesAuthorizationServer
    consent: tuple[str, tuple[str, ...], str] | None = None

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        assert self.consent is not None, "issue_code sets the consent"
        principal, workspaces, resource = self.consent
        now = self.server.now()
        grant_id = pysecrets.token_urlsafe(18)
        with self.server.write() as conn:
            store.create_grant(
                conn,
                grant_id=grant_id,
                client_id=request.client.client_id,
                principal=principal,
                resource=resource,
                workspaces=workspaces,
                now=now,
            )
            store.save_code(
                conn,
                code_hash=secrets.digest(code),
                grant_id=grant_id,
                client_id=request.client.client_id,
                redirect_uri=request.payload.redirect_uri,
                code_challenge=request.payload.data["code_challenge"],
                expires_at=now + secrets.CODE_TTL,
            )

    def generate_authorization_code(self) -> str:
        return secrets.mint(secrets.CODE_PREFIX)

    def validate_token_request(self) -> None:
        check_resource(self.server.config, self.request.payload.datalist.get("resource", []))
        if not self.request.payload.redirect_uri:
            raise InvalidRequestError("Missing 'redirect_uri' in request.")
        super().validate_token_request()

    def query_authorization_code(self, code: str, client: OAuthClient) -> IssuedCode | None:
        if not secrets.well_formed(code, secrets.CODE_PREFIX):
            return None
        now = self.server.now()
        with self.server.write() as conn:
            record, replayed = store.claim_code(conn, secrets.digest(code), now)
            if replayed and record is not None:
                # RFC 6749 4.1.2 / OAuth 2.1: a code used twice revokes what it issued.
                store.revoke_grant(conn, record.grant_id, now)
                log.warning("authorization code replayed: its grant is revoked")
                return None
            if record is None or record.client_id != client.client_id:
                return None
            found = store.get_grant(conn, record.grant_id)
        if found is None or found.revoked_at is not None:
            return None
        return IssuedCode(record)

    def delete_authorization_code(self, authorization_code: IssuedCode) -> None:
        return None  # spent when claimed

    def authenticate_user(self, authorization_code: IssuedCode) -> str | None:
        with self.server.read() as conn:
            found = store.get_grant(conn, authorization_code.record.grant_id)
        return None if found is None else found.principal


class RefreshGrant(authlib_grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(AUTH_METHODS)  # noqa: RUF012  (Authlib's attribute)
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: NotesAuthorizationServer

    def validate_token_request(self) -> None:
        check_resource(self.server.config, self.request.payload.datalist.get("resource", []))
        super().validate_token_request()

    def authenticate_refresh_token(self, refresh_token: str) -> KnownToken | None:
        if not secrets.well_formed(refresh_token, secrets.REFRESH_PREFIX):
            return None
        token_hash = secrets.digest(refresh_token)
        now = self.server.now()
        with self.server.write() as conn:
            active = store.find_token(conn, token_hash, "refresh", now)
            grant_id, reused = store.claim_refresh(conn, token_hash, now)
            if grant_id is not None and reused:
                # Rotation means a spent refresh token is only ever presented by a thief (or
                # by the client after the thief): end the whole family.
                store.revoke_grant(conn, grant_id, now)
                log.warning("refresh token reused: its grant is revoked")
                return None
        if active is None:
            return None
        return KnownToken(token_hash, "refresh", active.grant)

    def authenticate_user(self, refresh_token: KnownToken) -> str:
        return refresh_token.grant.principal

    def revoke_old_credential(self, refresh_token: KnownToken) -> None:
        return None  # spent when claimed


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = list(AUTH_METHODS)  # noqa: RUF012  (Authlib's attribute)
    server: NotesAuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> KnownToken | None:
        kinds = [("access", secrets.ACCESS_PREFIX), ("refresh", secrets.REFRESH_PREFIX)]
        now = self.server.now()
        for kind, prefix in kinds:
            if secrets.well_formed(token_string, prefix):
                token_hash = secrets.digest(token_string)
                with self.server.read() as conn:
                    active = store.find_token(conn, token_hash, kind, now)
                return None if active is None else KnownToken(token_hash, kind, active.grant)
        return None

    def revoke_token(self, token: KnownToken, request: OAuth2Request) -> None:
        now = self.server.now()
        with self.server.write() as conn:
            if token.kind == "refresh":
                store.revoke_grant(conn, token.grant.id, now)  # RFC 7009 2.1: and its tokens
            else:
                store.revoke_token(conn, token.token_hash, now)


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """RFC 7591 for clients that predate metadata documents; open only with
    `--registration open`, rate-limited by the route."""

    server: NotesAuthorizationServer

    def __init__(self, server: NotesAuthorizationServer) -> None:
        super().__init__(server, claims_classes=[ClientMetadataClaims])

    def authenticate_token(self, request: Any) -> bool:
        return self.server.config.registration == "open"

    def get_server_metadata(self) -> dict[str, Any]:
        return metadata(self.server.config)

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        found: dict[str, Any] = super().extract_client_metadata(request)
        uris = found.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
            raise _metadata_error("redirect_uris: give 1 to 10 redirect URIs")
        for uri in uris:
            problem = redirect_problem(uri)
            if problem is not None:
                raise _metadata_error(f"redirect_uris: {uri!r} {problem}", redirect=True)
        if found.get("token_endpoint_auth_method") not in AUTH_METHODS:
            raise _metadata_error("token_endpoint_auth_method: none, client_secret_post or basic")
        found.setdefault("grant_types", list(GRANT_TYPES))
        found.setdefault("response_types", ["code"])
        name = found.get("client_name")
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise _metadata_error("client_name: at most 200 characters")
        return found

    def generate_client_secret(self, request: Any) -> str | None:
        # RFC 7591 2: without a method the client authenticates with client_secret_basic.
        method = request.payload.data.get("token_endpoint_auth_method", "client_secret_basic")
        return None if method == "none" else pysecrets.token_urlsafe(32)

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
    ) -> OAuthClient:
        secret = client_info.get("client_secret")
        now = self.server.now()
        with self.server.write() as conn:
            store.put_client(
                conn,
                client_id=client_info["client_id"],
                kind="dcr",
                name=client_metadata.get("client_name"),
                secret_hash=None if secret is None else secrets.digest(secret),
                metadata=client_metadata,
                now=now,
            )
            record = store.get_client(conn, client_info["client_id"])
        assert record is not None
        return OAuthClient(record)


def _metadata_error(description: str, *, redirect: bool = False) -> OAuth2Error:
    from authlib.oauth2.rfc7591 import InvalidClientMetadataError, InvalidRedirectURIError

    kind = InvalidRedirectURIError if redirect else InvalidClientMetadataError
    error: OAuth2Error = kind(description)
    return error
