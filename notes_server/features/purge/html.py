"""The approval page's HTML: plain forms that work without JavaScript, every value escaped.

No scripts and no external resources: the page's CSP is `default-src 'none'` plus the hash of
the shared stylesheet (`page_style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from notes_server.features import page_style

MAX_LISTED = 200


def document(title: str, body: str) -> str:
    return page_style.document(title, body)


def message(title: str, text: str) -> str:
    return document(title, f"<p>{escape(text)}</p>")


def login_form(csrf: str, error: str | None = None) -> str:
    """Step 1 over HTTP: the person proves they are the principal that asked, with their own
    credential for this server (never a password or token of any other service)."""
    intro = (
        "sign in with <em>your own</em> API token (it starts with <code>nst_</code>), access "
        "token or account password for this notes server. Do not enter a password or a token "
        "of any other service."
    )
    return _secret_form(csrf, error, intro, "Token or password", "password")


def code_form(csrf: str, error: str | None = None) -> str:
    """Step 1 over stdio: the one-time code the server printed on its own stderr."""
    intro = (
        "enter the one-time approval code the notes server printed in the terminal or log "
        "where it runs (its standard error). Nothing else is asked for."
    )
    return _secret_form(csrf, error, intro, "Approval code", "text")


def _secret_form(csrf: str, error: str | None, intro: str, label: str, kind: str) -> str:
    problem = "" if error is None else f'<p role="alert"><strong>{escape(error)}</strong></p>'
    body = (
        f"{problem}<p>An assistant asked to permanently delete archived notes on this notes "
        f"server. To review the request, {intro}</p>\n"
        '<form method="post" action="/approval">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        f'<label>{escape(label)} <input type="{kind}" name="token" autocomplete="off" '
        'required></label> <div class="actions"><button type="submit">Sign in</button></div>'
        "</form>"
    )
    return document("Sign in to review a purge", body)


def confirm_form(
    csrf: str, workspace: str, titles: Sequence[str], segment: str, error: str | None = None
) -> str:
    """Step 2: exactly what will be destroyed, and the workspace name typed to confirm."""
    problem = "" if error is None else f'<p role="alert"><strong>{escape(error)}</strong></p>'
    shown = "".join(f"<li>{escape(title)}</li>" for title in titles[:MAX_LISTED])
    more = len(titles) - MAX_LISTED
    extra = f"<p>... and {more} more.</p>" if more > 0 else ""
    body = (
        f"{problem}<p>This will <strong>permanently delete {len(titles)} archived note(s)</strong>"
        f" in the workspace <code>{escape(workspace)}</code>. This cannot be undone.</p>\n"
        f"<ul>{shown}</ul>{extra}\n"
        '<form method="post" action="/approval">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        f"<label>Type <code>{escape(segment)}</code> to confirm "
        '<input type="text" name="confirm" autocomplete="off" required></label> '
        '<div class="actions"><button type="submit" class="danger">Permanently delete</button>'
        "</div></form>"
    )
    return document("Approve the purge", body)
