"""The sign-in and consent pages: plain forms (no JavaScript), every value escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from notes_server.features.page_style import document

SIGN_IN_PATH = "/oauth/sign-in"
CONSENT_PATH = "/oauth/consent"


def _alert(error: str | None) -> str:
    return "" if error is None else f'<p role="alert">{escape(error)}</p>'


def message(title: str, text: str) -> str:
    return document(title, f"<p>{escape(text)}</p>")


def sign_in(csrf: str, client_name: str, error: str | None = None, principal: str = "") -> str:
    body = (
        f"{_alert(error)}<p><strong>{escape(client_name)}</strong> asks to use your notes on "
        "this server. Sign in with your account here, or with one of your own API tokens "
        "(it starts with <code>nst_</code>).</p>\n"
        f'<form method="post" action="{SIGN_IN_PATH}">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        '<label for="principal">Account</label>'
        f'<input type="text" id="principal" name="principal" value="{escape(principal)}" '
        'autocomplete="username" autocapitalize="none" spellcheck="false">'
        '<label for="password">Password or API token</label>'
        '<input type="password" id="password" name="password" '
        'autocomplete="current-password" required>'
        '<p class="muted">With an API token the account name may stay empty.</p>'
        '<div class="actions"><button type="submit">Sign in</button></div></form>'
    )
    return document("Sign in", body)


def consent(
    csrf: str,
    *,
    client_name: str,
    client_host: str,
    redirect_uri: str,
    principal: str,
    workspaces: Sequence[tuple[str, str]],
    error: str | None = None,
) -> str:
    """`workspaces`: (canonical URI, role) of the principal's own grants."""
    if workspaces:
        boxes = "".join(
            f'<label class="check"><input type="checkbox" name="workspace" '
            f'value="{escape(uri)}" id="ws{i}"><span><code>{escape(uri)}</code> '
            f'<span class="muted">({escape(role)})</span></span></label>'
            for i, (uri, role) in enumerate(workspaces)
        )
    else:
        boxes = "<p>You have no workspaces on this server yet.</p>"
    body = (
        f"{_alert(error)}<p>Signed in as <code>{escape(principal)}</code>.</p>"
        "<dl><dt>Application</dt>"
        f"<dd>{escape(client_name)}</dd><dt>Identified by</dt><dd><code>{escape(client_host)}"
        f"</code></dd><dt>Returns you to</dt><dd><code>{escape(redirect_uri)}</code></dd></dl>\n"
        f'<form method="post" action="{CONSENT_PATH}">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        "<fieldset><legend>Workspaces it may use</legend>"
        f"{boxes}</fieldset>"
        '<p class="muted">It gets only the workspaces you tick, with your own access to them, '
        "until you or the operator revoke it.</p>"
        '<div class="actions"><button type="submit" name="decision" value="allow">Allow</button>'
        '<button type="submit" name="decision" value="deny" class="secondary">Deny</button>'
        "</div></form>"
    )
    return document("Allow access to your notes?", body)
