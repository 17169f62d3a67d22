"""How the approval page knows the person is the principal that started the purge.

- `TokenLogin` (HTTP): the principal's own credential for this server, typed into the page,
  checked by the HTTP server's own authenticator (stored `nst_` tokens and, with `--auth jwt`,
  JWTs), else (`--auth none`, which accepts anything) only as a stored `nst_` token; or the
  password of the principal's local account (`notes-server user add`, used by `--auth oauth`),
  never an OAuth access token (that is the assistant's credential, not the person's).
- `CodeLogin` (stdio): a one-time code the server prints on its stderr when the link is opened.
  Only the person who can read the server's own terminal or log sees it; the stdio server acts
  for one principal.

Neither counts wrong secrets: the page does, on the approval's row (`approvals.MAX_ATTEMPTS`),
so one limit holds for both and across every worker and instance sharing the database.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from notes_server.features.purge import html

if TYPE_CHECKING:
    from notes_server.store.approvals import Approval
    from notes_server.tools.services import Services

MAX_CREDENTIAL = 8192
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
WRONG_TOKEN = "That token does not belong to the account that asked for this purge."
WRONG_CODE = "That is not the approval code this server printed for this request."


class Login(Protocol):
    def form(self, csrf: str, error: str | None = None) -> str:
        """The sign-in step's HTML."""

    def refusal(self) -> str:
        """What a wrong secret is told (never which part was wrong)."""

    def link_opened(self, approval: str) -> None:
        """The one-time link was just spent for `approval`."""

    def principal_for(self, approval: Approval, secret: str) -> str | None:
        """The approval's principal if `secret` proves the person is it; else None."""

    def use_authenticator(self, verify: Callable[[str], str | None]) -> None:
        """Check typed credentials with the HTTP server's authenticator from now on."""


class TokenLogin:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.verify: Callable[[str], str | None] | None = None

    def use_authenticator(self, verify: Callable[[str], str | None]) -> None:
        self.verify = verify

    def form(self, csrf: str, error: str | None = None) -> str:
        return html.login_form(csrf, error)

    def refusal(self) -> str:
        return WRONG_TOKEN

    def link_opened(self, approval: str) -> None:
        return None

    def principal_for(self, approval: Approval, secret: str) -> str | None:
        from notes_server.security.tokens import TokenVerifier, looks_like_token
        from notes_server.store.tokens import SqlTokenRecords

        if not secret or len(secret) > MAX_CREDENTIAL:
            return None
        credential = secret.strip()
        principal = None
        if credential and not any(c.isspace() for c in credential):
            if self.verify is not None:
                principal = self.verify(credential)
            elif looks_like_token(credential):
                records = SqlTokenRecords(self.services.engine)
                principal = TokenVerifier(records).principal_for(credential)
        if principal is None and self.account_password(approval.principal, secret):
            principal = approval.principal
        return principal if principal == approval.principal else None

    def account_password(self, principal: str, secret: str) -> bool:
        """True when `secret` is the password of `principal`'s local account (argon2id; only
        when the optional `oauth` extra is installed and the account exists)."""
        from notes_server.store import oauth
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            stored = oauth.password_hash(conn, principal)
        if stored is None:
            return False
        from notes_server.security.passwords import verify_password

        try:
            return verify_password(stored, secret)
        except ImportError:  # argon2-cffi (the `oauth` extra) is not installed
            return False


class CodeLogin:
    def __init__(self, principal: str, out: TextIO | None = None) -> None:
        self.principal = principal
        self.out = out
        self.lock = threading.Lock()
        self.codes: dict[str, str] = {}  # approval -> SHA-256 of its code

    def form(self, csrf: str, error: str | None = None) -> str:
        return html.code_form(csrf, error)

    def refusal(self) -> str:
        return WRONG_CODE

    def link_opened(self, approval: str) -> None:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(10))
        with self.lock:
            self.codes[approval] = _digest(code)
        shown = f"{code[:5]}-{code[5:]}"
        out = self.out or sys.stderr
        out.write(f"notes-server: approval code for purge request {approval}: {shown}\n")
        out.flush()

    def use_authenticator(self, verify: Callable[[str], str | None]) -> None:
        return None  # the code, printed on this server's stderr, is the only proof here

    def principal_for(self, approval: Approval, secret: str) -> str | None:
        typed = secret.replace("-", "").replace(" ", "").upper()
        with self.lock:
            digest = self.codes.get(approval.id)
            if digest is None or not secrets.compare_digest(digest, _digest(typed)):
                return None
            del self.codes[approval.id]  # one sign-in per code
        return self.principal if approval.principal == self.principal else None


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode("ascii", "replace")).hexdigest()
