"""The authorization server's HTTP routes (Starlette), behind the same middleware as `/mcp`.

The browser steps:

1. `GET /oauth/authorize?...`: Authlib validates the request (client, exact redirect URI,
   response type, PKCE S256); this module adds the RFC 8707 `resource` check. An error that
   cannot be sent back to a verified redirect URI is shown as a page; any other goes back to
   the client (with `state` and `iss`). A valid request is sealed into a short-lived cookie and
   the browser is sent to `/oauth/sign-in`, so nothing of it stays in a URL.
2. `/oauth/sign-in`: an account's password (argon2id; `store.oauth.MAX_SIGN_IN_FAILURES`
   wrong ones lock the name for a while, counted in the database) or one of the principal's
   own `nst_` tokens.
3. `/oauth/consent`: the client, its host, the redirect URI, and the principal's workspaces as
   checkboxes; the grant is the ticked ones that are still the principal's. Allow sends the
   browser to the client with a code; Deny with `access_denied`.

The cookie is sealed with the state keys (any worker or instance opens it), HttpOnly,
SameSite=Lax (the client's redirect into step 1 is a cross-site navigation), Secure behind
https, path `/oauth`. Every form carries a CSRF token that must equal the cookie's. Pages forbid
framing and caching.

The metadata, token, revocation and registration endpoints are open to scripts of any origin
(`OAuthEndpointRoute`); the authorization request and the pages are not (`OAuthFormRoute`).
"""

from __future__ import annotations

import json
import logging
import secrets as pysecrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from notes_server.features import page_style
from notes_server.features.oauth import pages
from notes_server.features.oauth.pages import CONSENT_PATH, SIGN_IN_PATH
from notes_server.features.oauth.server import (
    AUTHORIZE_PATH,
    METADATA_PATH,
    REGISTER_PATH,
    REVOKE_PATH,
    TOKEN_PATH,
    AuthlibResponse,
    Incoming,
    NotesAuthorizationServer,
    OAuthConfig,
    check_resource,
    form_pairs,
    metadata,
)
from notes_server.tools.services import Services

log = logging.getLogger("notes_server.oauth")

COOKIE = "notes_oauth"
COOKIE_KIND = "notes-oauth-flow"
FLOW_TTL = timedelta(minutes=10)
# The request is sealed into the flow cookie, and browsers keep cookies of up to 4 KiB.
MAX_QUERY = 2560
MAX_FIELD = 8192
FORM_TYPE = "application/x-www-form-urlencoded"
REGISTRATIONS_PER_WINDOW = 30
REGISTRATION_WINDOW = timedelta(minutes=10)
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
JSON_HEADERS = {"Cache-Control": "no-store", "Pragma": "no-cache"}

NO_FLOW = "Start again from your application: this sign-in expired or was not started here."
BAD_CSRF = "The form was not submitted from this page. Start again from your application."
WRONG = "That account and password (or token) do not match."
LOCKED = "Too many wrong sign-ins for this account. Wait 15 minutes and try again."
NONE_TICKED = "Tick at least one workspace, or deny."


class OAuthRoute(Route):
    """Served without a bearer credential: these routes are how a client gets one."""

    serves_without_credential = True


class OAuthFormRoute(OAuthRoute):
    """A page with its own forms, POSTed from its own origin; the authorization request too,
    which leads to them. A browser reaches these by navigation, which sends no Origin on a
    GET: a script from another origin is refused and gets no CORS headers."""

    same_origin_forms = True


class OAuthEndpointRoute(OAuthRoute):
    """The client's endpoints and the metadata: public, no cookie, answering only to what the
    request carries, so any site's script may call them (CORS with `*`, the transport's open
    paths): a host that runs the flow from browser JavaScript can finish it."""

    any_origin = True


def page(status: int, body: str, *form_targets: str) -> Response:
    headers = {**PAGE_HEADERS, "Content-Security-Policy": page_style.csp(*form_targets)}
    return HTMLResponse(body, status_code=status, headers=headers)


def _json(answer: AuthlibResponse) -> Response:
    headers = {name: value for name, value in answer.headers if name.lower() != "content-type"}
    body = answer.body if isinstance(answer.body, dict | list) else {}
    return Response(
        json.dumps(body),
        status_code=answer.status,
        media_type="application/json",
        headers={**headers, **JSON_HEADERS},
    )


def _redirect(answer: AuthlibResponse) -> Response:
    location = answer.location
    if answer.status not in (302, 303) or not location:
        return _json(answer)
    return RedirectResponse(location, status_code=302, headers=PAGE_HEADERS)


def redirect_origin(uri: str) -> str:
    """What the consent page's form-action must allow for the redirect to the client."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


class OAuthRoutes:
    def __init__(self, services: Services, config: OAuthConfig) -> None:
        self.services = services
        self.config = config
        self.server = NotesAuthorizationServer(services, config)
        self.secure = config.issuer.startswith("https://")

    def routes(self) -> list[BaseRoute]:
        found: list[BaseRoute] = [
            OAuthEndpointRoute(METADATA_PATH, self.metadata, methods=["GET"]),
            OAuthFormRoute(AUTHORIZE_PATH, self.authorize, methods=["GET"]),
            OAuthFormRoute(SIGN_IN_PATH, self.sign_in, methods=["GET", "POST"]),
            OAuthFormRoute(CONSENT_PATH, self.consent, methods=["GET", "POST"]),
            OAuthEndpointRoute(TOKEN_PATH, self.token, methods=["POST"]),
            OAuthEndpointRoute(REVOKE_PATH, self.revoke, methods=["POST"]),
        ]
        if self.config.registration == "open":
            found.append(OAuthEndpointRoute(REGISTER_PATH, self.register, methods=["POST"]))
        return found

    # -- discovery ---------------------------------------------------------------------------

    async def metadata(self, request: Request) -> Response:
        return Response(
            json.dumps(metadata(self.config)),
            media_type="application/json",
            headers={"Cache-Control": "max-age=300"},
        )

    # -- the flow cookie ---------------------------------------------------------------------

    def seal(self, query: str, csrf: str, principal: str | None = None) -> str:
        claims: dict[str, Any] = {"kind": COOKIE_KIND, "q": query, "csrf": csrf}
        if principal is not None:
            claims["p"] = principal
        return self.services.sealer.seal(claims, FLOW_TTL.total_seconds())

    def flow_of(self, request: Request) -> dict[str, Any] | None:
        from notes_server.security.state import StateError

        value = request.cookies.get(COOKIE)
        if not value or len(value) > 4096:
            return None
        try:
            claims = self.services.sealer.open(value)
        except StateError:
            return None
        if claims.get("kind") != COOKIE_KIND:
            return None
        if not isinstance(claims.get("q"), str) or not isinstance(claims.get("csrf"), str):
            return None
        if "p" in claims and not isinstance(claims["p"], str):
            return None
        return claims

    def with_cookie(self, response: Response, sealed: str | None) -> Response:
        if sealed is None:
            response.delete_cookie(
                COOKIE, path="/oauth", secure=self.secure, httponly=True, samesite="lax"
            )
            return response
        response.set_cookie(
            COOKIE,
            sealed,
            max_age=int(FLOW_TTL.total_seconds()),
            path="/oauth",
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )
        return response

    def incoming(self, query: str) -> Incoming:
        from urllib.parse import parse_qsl

        pairs = parse_qsl(query, keep_blank_values=True)
        return Incoming("GET", f"{self.config.issuer}{AUTHORIZE_PATH}?{query}", {}, pairs)

    # -- step 1: the authorization request ---------------------------------------------------

    async def authorize(self, request: Request) -> Response:
        query = request.url.query
        if len(query) > MAX_QUERY:
            return page(400, pages.message("Invalid request", "The request is too long."))
        outcome = await run_in_threadpool(self.check_request, query)
        if isinstance(outcome, Response):
            return outcome
        sealed = self.seal(query, pysecrets.token_urlsafe(32))
        response = RedirectResponse(SIGN_IN_PATH, status_code=303, headers=PAGE_HEADERS)
        return self.with_cookie(response, sealed)

    def check_request(self, query: str) -> Any:
        """The validated Authlib grant, or the response for an invalid request."""
        from authlib.oauth2.rfc6749 import OAuth2Error

        incoming = self.incoming(query)
        names = [name for name, _ in incoming.pairs]
        if names.count("resource") > 1 or any(names.count(n) > 1 for n in ("code_challenge",)):
            return page(400, pages.message("Invalid request", "A parameter is repeated."))
        try:
            if not dict(incoming.pairs).get("redirect_uri"):
                return page(400, pages.message("Invalid request", "Missing redirect_uri."))
            grant = self.server.get_consent_grant(incoming, None)
        except OAuth2Error as error:
            return self.authorize_error(error)
        try:
            check_resource(self.config, grant.request.payload.datalist.get("resource", []))
        except OAuth2Error as error:
            error.redirect_uri = grant.redirect_uri
            error.state = grant.request.payload.state
            return self.authorize_error(error)
        return grant

    def authorize_error(self, error: Any) -> Response:
        """Back to the client when its redirect URI was verified (with state and iss), else a
        page: an unverified redirect URI is never followed (no open redirect)."""
        if not getattr(error, "redirect_uri", None):
            description = error.description or error.error
            return page(400, pages.message("This sign-in link is not valid", str(description)))
        headers = error()[2]
        location = dict(headers).get("Location", "")
        glue = "&" if "?" in location else "?"
        location += glue + urlencode({"iss": self.config.issuer})
        return RedirectResponse(location, status_code=302, headers=PAGE_HEADERS)

    # -- step 2: sign-in ---------------------------------------------------------------------

    async def sign_in(self, request: Request) -> Response:
        flow = self.flow_of(request)
        if flow is None:
            return page(403, pages.message("Sign-in expired", NO_FLOW))
        grant = await run_in_threadpool(self.check_request, flow["q"])
        if isinstance(grant, Response):
            return self.with_cookie(grant, None)
        name = grant.client.name
        if request.method == "GET":
            return page(200, pages.sign_in(flow["csrf"], name))
        form = await self.form_of(request, flow)
        if isinstance(form, Response):
            return form
        typed = form.get("principal", [""])[0].strip()
        secret = form.get("password", [""])[0]
        checked = await run_in_threadpool(self.check_sign_in, typed, secret)
        if checked == "locked":
            return page(429, pages.sign_in(flow["csrf"], name, LOCKED, typed))
        if checked is None:
            return page(401, pages.sign_in(flow["csrf"], name, WRONG, typed))
        sealed = self.seal(flow["q"], pysecrets.token_urlsafe(32), checked)
        response = RedirectResponse(CONSENT_PATH, status_code=303, headers=PAGE_HEADERS)
        return self.with_cookie(response, sealed)

    async def form_of(self, request: Request, flow: dict[str, Any]) -> dict[str, list[str]] | Any:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != FORM_TYPE:
            return page(415, pages.message("Unsupported form", "Submit the form on the page."))
        pairs = form_pairs(await request.body())
        if pairs is None or any(len(value) > MAX_FIELD for _, value in pairs):
            return page(400, pages.message("Invalid form", "Submit the form on the page."))
        form: dict[str, list[str]] = {}
        for key, value in pairs:
            form.setdefault(key, []).append(value)
        csrf = form.get("csrf", [""])
        if len(csrf) != 1 or not pysecrets.compare_digest(csrf[0], flow["csrf"]):
            return page(403, pages.message("Request refused", BAD_CSRF))
        return form

    def check_sign_in(self, typed: str, secret: str) -> str | None:
        """The principal, "locked", or None. Wrong passwords count against the typed name,
        account or not; the answer never says which part was wrong or whether it exists."""
        from notes_server.security.passwords import verify_password
        from notes_server.security.principals import local_problem
        from notes_server.security.tokens import PREFIX, TokenVerifier
        from notes_server.store import oauth as store
        from notes_server.store.engine import read_tx, write_tx
        from notes_server.store.tokens import SqlTokenRecords

        secret = secret.strip() if secret.startswith(PREFIX) else secret
        if secret.startswith(PREFIX) and len(secret) < 100:
            principal = TokenVerifier(SqlTokenRecords(self.services.engine)).principal_for(secret)
            if principal is not None and typed in ("", principal):
                return principal
            return None
        if not typed or local_problem(typed) is not None or not secret:
            return None
        now = self.services.clock()
        with read_tx(self.services.engine) as conn:
            if store.locked(conn, typed, now):
                return "locked"
            stored = store.password_hash(conn, typed)
        if verify_password(stored, secret):
            with write_tx(self.services.engine) as conn:
                store.clear_failures(conn, typed)
            return typed
        with write_tx(self.services.engine) as conn:
            locked_now = store.count_failure(conn, typed, now)
        if locked_now:
            log.warning("sign-in locked after too many wrong passwords for one account name")
            return "locked"
        return None

    # -- step 3: consent ---------------------------------------------------------------------

    async def consent(self, request: Request) -> Response:
        flow = self.flow_of(request)
        if flow is None or "p" not in flow:
            return page(403, pages.message("Sign-in expired", NO_FLOW))
        grant = await run_in_threadpool(self.check_request, flow["q"])
        if isinstance(grant, Response):
            return self.with_cookie(grant, None)
        principal: str = flow["p"]
        owned = await run_in_threadpool(self.workspaces_of, principal)
        target = redirect_origin(grant.redirect_uri)
        if request.method == "GET":
            return page(200, self.consent_page(flow, grant, principal, owned), target)
        form = await self.form_of(request, flow)
        if isinstance(form, Response):
            return form
        decision = form.get("decision", [""])
        if decision == ["deny"]:
            answer = await run_in_threadpool(
                self.server.create_authorization_response, grant.request, None, grant
            )
            return self.with_cookie(_redirect(answer), None)
        if decision != ["allow"]:
            return page(400, pages.message("Invalid form", "Choose Allow or Deny."))
        # Never more than the principal's own: a forged checkbox for someone else's workspace
        # is simply not in `owned`.
        ticked = sorted(set(form.get("workspace", [])) & {uri for uri, _ in owned})
        if not ticked:
            body = self.consent_page(flow, grant, principal, owned, NONE_TICKED)
            return page(400, body, target)
        answer = await run_in_threadpool(
            self.server.issue_code, grant, principal, ticked, self.config.resource
        )
        return self.with_cookie(_redirect(answer), None)

    def consent_page(
        self,
        flow: dict[str, Any],
        grant: Any,
        principal: str,
        owned: Sequence[tuple[str, str]],
        error: str | None = None,
    ) -> str:
        client = grant.client
        host = urlsplit(client.client_id).hostname if "://" in client.client_id else None
        return pages.consent(
            flow["csrf"],
            client_name=client.name,
            client_host=host or f"registered client {client.client_id}",
            redirect_uri=grant.redirect_uri,
            principal=principal,
            workspaces=owned,
            error=error,
        )

    def workspaces_of(self, principal: str) -> list[tuple[str, str]]:
        from notes_server.security.uri import parse_workspace_uri
        from notes_server.store import grants
        from notes_server.store.engine import read_tx

        found = []
        with read_tx(self.services.engine) as conn:
            for grant in grants.list_grants(conn, principal):
                try:
                    found.append((parse_workspace_uri(grant.workspace).uri, grant.role))
                except ValueError:
                    continue
        return sorted(found)

    # -- the client's endpoints --------------------------------------------------------------

    async def token(self, request: Request) -> Response:
        incoming = await self.form_request(request, TOKEN_PATH)
        if isinstance(incoming, Response):
            return incoming
        answer = await run_in_threadpool(self.server.create_token_response, incoming)
        return _json(answer)

    async def revoke(self, request: Request) -> Response:
        incoming = await self.form_request(request, REVOKE_PATH)
        if isinstance(incoming, Response):
            return incoming
        answer = await run_in_threadpool(
            self.server.create_endpoint_response, "revocation", incoming
        )
        return _json(answer)

    async def register(self, request: Request) -> Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return _error(400, "invalid_client_metadata", "Send the metadata as JSON.")
        try:
            data = json.loads(await request.body())
        except ValueError:
            return _error(400, "invalid_client_metadata", "The body is not JSON.")
        if not isinstance(data, dict):
            return _error(400, "invalid_client_metadata", "The metadata must be an object.")
        if not await run_in_threadpool(self.registration_allowed):
            return _error(429, "temporarily_unavailable", "Too many registrations; retry later.")
        incoming = Incoming("POST", self.config.issuer + REGISTER_PATH, {}, (), data)
        answer = await run_in_threadpool(
            self.server.create_endpoint_response, "client_registration", incoming
        )
        return _json(answer)

    def registration_allowed(self) -> bool:
        from notes_server.store import oauth as store
        from notes_server.store.engine import read_tx

        since = self.services.clock() - REGISTRATION_WINDOW
        with read_tx(self.services.engine) as conn:
            return store.count_registered_since(conn, since) < REGISTRATIONS_PER_WINDOW

    async def form_request(self, request: Request, path: str) -> Incoming | Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != FORM_TYPE:
            return _error(400, "invalid_request", f"Content-Type must be {FORM_TYPE}.")
        pairs = form_pairs(await request.body())
        if pairs is None:
            return _error(400, "invalid_request", "The body is not a valid form.")
        headers = {}
        if "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        return Incoming("POST", self.config.issuer + path, headers, pairs)


def _error(status: int, error: str, description: str) -> Response:
    body = {"error": error, "error_description": description}
    return Response(
        json.dumps(body), status_code=status, media_type="application/json", headers=JSON_HEADERS
    )


def oauth_routes(
    services: Services, issuer: str, registration: str, dev_addresses: bool = False
) -> list[BaseRoute]:
    config = OAuthConfig(issuer.rstrip("/"), registration, dev_addresses)
    return OAuthRoutes(services, config).routes()
