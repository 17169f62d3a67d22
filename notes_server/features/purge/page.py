"""The approval page: `GET/POST /approval`, served without a bearer header (a browser has none)
but never without proof that the person is the principal that started the purge.

1. `GET /approval?a=<id>&k=<link secret>`: spends the one-time link (a second use fails), sets
   a sealed "link" cookie and redirects to the clean `/approval`, so no secret stays in the URL.
2. The login form asks for the principal's own credential for this server (an API token, or
   an access token (JWT) when the server accepts them: the same authenticator as `/mcp`); a
   credential of another principal is refused. Success sets a short sealed session cookie
   (HttpOnly, SameSite=Strict, Secure unless on loopback plain HTTP). Every refused credential
   is counted on the approval's row; the `approvals.MAX_ATTEMPTS`th locks the approval for
   good (audited as "locked"), whichever workers and instances the attempts reached.
3. The confirm form shows the workspace, the count and the titles and asks for the workspace's
   last path segment; submitting it records the approval in the database row.

Every form carries a CSRF token that must equal the one sealed in the cookie. Every response
forbids framing and caching and runs no script.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from notes_server.features import page_style
from notes_server.features.purge import html
from notes_server.features.purge.login import Login, TokenLogin
from notes_server.features.purge.tool import APPROVAL_PATH, last_segment, link_hash
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.approvals import Approval

COOKIE = "notes_approval"
COOKIE_KIND = "notes-purge-approval"
SESSION_TTL = timedelta(minutes=10)
MAX_FIELD = 8192
HEADERS = {
    "Content-Security-Policy": page_style.CSP,
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    # Not `no-referrer`: with it Chromium sends `Origin: null` on the page's own form POSTs,
    # which the Origin guard must refuse. `same-origin` still tells no other site anything.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
STEPS = frozenset({"login", "confirm"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class ApprovalRoute(Route):
    """Served without a bearer credential: the page authenticates the person itself, with
    the HTTP server's own authenticator when it lends it (`use_authenticator`), and takes
    form POSTs from its own origin (`same_origin_forms`)."""

    serves_without_credential = True
    same_origin_forms = True

    def __init__(self, page: ApprovalPage) -> None:
        super().__init__(APPROVAL_PATH, page.handle, methods=["GET", "POST"])
        self.page = page

    def use_authenticator(self, verify: Callable[[str], str | None]) -> None:
        self.page.login.use_authenticator(verify)


@dataclass(frozen=True, slots=True)
class Visit:
    """What the sealed cookie says: which approval, which step, who (after sign-in), CSRF."""

    approval: str
    step: str
    csrf: str
    principal: str | None = None


def routes(services: Services, login: Login | None = None) -> list[Route]:
    """The page's route; `login` defaults to the principal's own API token (HTTP)."""
    page = ApprovalPage(services, login or TokenLogin(services))
    return [ApprovalRoute(page)]


def respond(status: int, body: str) -> Response:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def redirect_with(request: Request, visit: Visit | None, sealed: str | None) -> Response:
    """303 to the clean page URL, setting (or clearing) the cookie."""
    response = RedirectResponse(APPROVAL_PATH, status_code=303, headers=HEADERS)
    secure = request.url.scheme == "https" or request.url.hostname not in LOOPBACK_HOSTS
    if visit is None or sealed is None:
        response.delete_cookie(COOKIE, path=APPROVAL_PATH, httponly=True, secure=secure)
        return response
    # The link step arrives from a click in another application: a Strict cookie would not
    # come back on that navigation's redirect, so only it is Lax (it grants nothing but the
    # sign-in form). The signed-in session is Strict.
    same_site: Any = "lax" if visit.step == "login" else "strict"
    response.set_cookie(
        COOKIE,
        sealed,
        max_age=int(SESSION_TTL.total_seconds()),
        path=APPROVAL_PATH,
        secure=secure,
        httponly=True,
        samesite=same_site,
    )
    return response


class ApprovalPage:
    def __init__(self, services: Services, login: Login) -> None:
        self.services = services
        self.login = login

    async def handle(self, request: Request) -> Response:
        if request.method == "POST":
            return await self.post(request)
        if request.method != "GET":  # a HEAD (a link preview) must not spend the link
            return respond(405, html.message("Method not allowed", NO_VISIT))
        if request.query_params:
            return await self.open_link(request)
        visit = self.visit_of(request)
        if visit is None:
            return respond(403, html.message("No approval in progress", NO_VISIT))
        if visit.step == "login":
            return await run_in_threadpool(self.login_page, visit)
        return await run_in_threadpool(self.confirm_page, visit, None)

    # -- the cookie -----------------------------------------------------------------------

    def seal(self, visit: Visit) -> str:
        claims = {"kind": COOKIE_KIND, "pa": visit.approval, "st": visit.step, "csrf": visit.csrf}
        if visit.principal is not None:
            claims["p"] = visit.principal
        return self.services.sealer.seal(claims, SESSION_TTL.total_seconds())

    def visit_of(self, request: Request) -> Visit | None:
        """The cookie's visit, or None if absent, forged, expired or not ours."""
        from notes_server.security.state import StateError

        value = request.cookies.get(COOKIE)
        if not value or len(value) > MAX_FIELD:
            return None
        try:
            claims = self.services.sealer.open(value)
        except StateError:
            return None
        fields = [claims.get(name) for name in ("pa", "st", "csrf")]
        if claims.get("kind") != COOKIE_KIND or not all(isinstance(f, str) for f in fields):
            return None
        principal = claims.get("p")
        if claims["st"] not in STEPS or (claims["st"] == "confirm") != isinstance(principal, str):
            return None
        return Visit(claims["pa"], claims["st"], claims["csrf"], principal)

    # -- step 1: the one-time link ----------------------------------------------------------

    async def open_link(self, request: Request) -> Response:
        approval_id = request.query_params.get("a", "")
        secret = request.query_params.get("k", "")
        if not approval_id or not secret or len(approval_id) > 40 or len(secret) > 100:
            return respond(400, html.message("Invalid approval link", BAD_LINK))
        spent = await run_in_threadpool(self.spend, approval_id, secret)
        if not spent:
            return respond(403, html.message("Invalid approval link", BAD_LINK))
        self.login.link_opened(approval_id)
        visit = Visit(approval_id, "login", secrets.token_urlsafe(32))
        return redirect_with(request, visit, self.seal(visit))

    def spend(self, approval_id: str, secret: str) -> bool:
        from notes_server.store import approvals
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            return approvals.spend_link(conn, approval_id, link_hash(secret), self.services.clock())

    # -- the forms --------------------------------------------------------------------------

    async def post(self, request: Request) -> Response:
        visit = self.visit_of(request)
        if visit is None:
            return respond(403, html.message("No approval in progress", NO_VISIT))
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != FORM_TYPE:
            return respond(415, html.message("Unsupported form", "Submit the form on the page."))
        form = parse_form(await request.body())
        if form is None or not secrets.compare_digest(form.get("csrf", ""), visit.csrf):
            return respond(403, html.message("Request refused", BAD_CSRF))
        if visit.step == "login":
            return await self.sign_in(request, visit, form.get("token", ""))
        return await run_in_threadpool(self.approve, visit, form.get("confirm", ""))

    def login_page(self, visit: Visit) -> Response:
        closed = self.closed(self.current(visit.approval), self.services.clock())
        return closed or respond(200, self.login.form(visit.csrf))

    async def sign_in(self, request: Request, visit: Visit, token: str) -> Response:
        checked = await run_in_threadpool(self.owner_of, visit, token)
        if not isinstance(checked, str):
            return checked
        session = Visit(visit.approval, "confirm", secrets.token_urlsafe(32), checked)
        return redirect_with(request, session, self.seal(session))

    def owner_of(self, visit: Visit, secret: str) -> str | Response:
        """The approval's principal if `secret` proves the person is it (see `login`); else
        the page to show. A wrong secret is counted on the row first: the limit then holds
        whichever worker or instance each attempt reaches. The secret is never logged."""
        from notes_server.store import approvals
        from notes_server.store.engine import write_tx

        now = self.services.clock()
        approval = self.current(visit.approval)
        closed = self.closed(approval, now)
        if closed is not None:
            return closed
        assert approval is not None  # closed() answers for a missing row
        principal = self.login.principal_for(approval, secret)
        if principal is not None:
            return principal
        with write_tx(self.services.engine) as conn:
            failures = approvals.count_failed_sign_in(conn, approval.id, now)
            if failures == approvals.MAX_ATTEMPTS:
                self.audit_lock(conn, approval, now)
        if failures is None:  # locked, expired or answered meanwhile
            closed = self.closed(self.current(visit.approval), now)
        elif failures >= approvals.MAX_ATTEMPTS:
            closed = respond(403, html.message("Approval locked", LOCKED))
        return closed or respond(403, self.login.form(visit.csrf, self.login.refusal()))

    def current(self, approval_id: str) -> Approval | None:
        from notes_server.store import approvals
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            return approvals.get(conn, approval_id)

    @staticmethod
    def closed(approval: Approval | None, now: datetime) -> Response | None:
        """The page for an approval that can no longer be signed in to, else None."""
        if approval is None or approval.expires_at <= now:
            return respond(410, html.message("Approval closed", CLOSED))
        if approval.locked:
            return respond(403, html.message("Approval locked", LOCKED))
        return None

    @staticmethod
    def audit_lock(conn: Connection, approval: Approval, now: datetime) -> None:
        """Audited like the tool's own outcomes, for the principal whose purge it was (who
        typed the wrong credentials is not known); no nonce, the page never sees the state."""
        from notes_server.features.purge.tool import PurgeNotes
        from notes_server.store import approvals, audit

        title = (
            f"purge of {len(approval.items)} archived note(s): locked after "
            f"{approvals.MAX_ATTEMPTS} wrong sign-ins"
        )
        entry = audit.AuditRecord(
            at=now,
            principal=approval.principal,
            tool=PurgeNotes.action.tool,
            outcome="locked",
            workspace=approval.workspace,
            note_id=None,
            note_title=title,
            note_path=None,
            nonce=None,
        )
        audit.record(conn, entry)

    def confirm_page(self, visit: Visit, error: str | None) -> Response:
        from notes_server.store import approvals
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            approval = approvals.get(conn, visit.approval)
        now = self.services.clock()
        usable = approval is not None and approval.principal == visit.principal
        if approval is None or not usable or approval.expires_at <= now:
            return respond(410, html.message("Approval closed", CLOSED))
        if approval.locked:
            return respond(403, html.message("Approval locked", LOCKED))
        if approval.approved_at is not None:
            return respond(200, html.message("Purge approved", APPROVED))
        titles = [title for _, _, title in approval.items]
        segment = last_segment(approval.workspace)
        page = html.confirm_form(visit.csrf, approval.workspace, titles, segment, error)
        return respond(200 if error is None else 400, page)

    def approve(self, visit: Visit, typed: str) -> Response:
        from notes_server.store import approvals
        from notes_server.store.engine import read_tx, write_tx

        assert visit.principal is not None  # visit_of refuses a confirm step without one
        with read_tx(self.services.engine) as conn:
            approval = approvals.get(conn, visit.approval)
        if approval is None or approval.principal != visit.principal:
            return respond(410, html.message("Approval closed", CLOSED))
        if approval.locked:
            return respond(403, html.message("Approval locked", LOCKED))
        if typed.strip() != last_segment(approval.workspace):
            return self.confirm_page(visit, MISTYPED)
        with write_tx(self.services.engine) as conn:
            done = approvals.approve(conn, visit.approval, visit.principal, self.services.clock())
        if not done:  # expired, answered, or locked by wrong sign-ins elsewhere meanwhile
            return respond(410, html.message("Approval closed", CLOSED))
        return respond(200, html.message("Purge approved", APPROVED))


FORM_TYPE = "application/x-www-form-urlencoded"
NO_VISIT = "Open the approval link your assistant showed you (each link works once)."
BAD_LINK = "This approval link is invalid, expired or was already used."
BAD_CSRF = "The form was not submitted from this page. Reload the page and try again."
CLOSED = "This approval is no longer open (it expired, was answered or was used)."
APPROVED = "Approved. Go back to your assistant and continue: it will now purge these notes."
MISTYPED = "The name you typed does not match the workspace. Nothing was approved."
LOCKED = (
    "This approval was locked after too many wrong sign-ins and can no longer be used. Nothing "
    "was deleted. To purge these notes, start the purge again from your assistant."
)


def parse_form(body: bytes) -> dict[str, str] | None:
    """An urlencoded form with each field at most once and of bounded size, else None."""
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    if any(len(values) != 1 or len(values[0]) > MAX_FIELD for values in fields.values()):
        return None
    return {name: values[0] for name, values in fields.items()}
