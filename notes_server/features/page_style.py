"""The one small stylesheet of the server's own pages (sign-in, consent, purge approval).

Inline, allowed by its SHA-256 in the pages' Content-Security-Policy (no `unsafe-inline`, no
external fonts or scripts). It follows the system's light or dark preference, reads at 320 px
wide, keeps the browser's focus ring visible (thicker), and its colours pass WCAG AA contrast
for body text on both backgrounds.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

STYLESHEET = """
:root{color-scheme:light dark;--bg:#fbfbfa;--fg:#1d1d1f;--muted:#4a4a50;--line:#c9c9cf;
--accent:#0b57d0;--accent-fg:#fff;--danger:#a50e0e;--card:#fff}
@media (prefers-color-scheme:dark){:root{--bg:#17171a;--fg:#ececf0;--muted:#b8b8c2;
--line:#45454d;--accent:#8ab4f8;--accent-fg:#0b1b33;--danger:#f28b82;--card:#212126}}
*{box-sizing:border-box}
body{margin:0;padding:1rem;background:var(--bg);color:var(--fg);
font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:34rem;margin:2rem auto;padding:1.25rem;background:var(--card);
border:1px solid var(--line);border-radius:.5rem}
h1{font-size:1.35rem;line-height:1.3;margin:0 0 1rem}
p,ul,fieldset{margin:0 0 1rem}
code{overflow-wrap:anywhere;font-size:.95em}
.muted{color:var(--muted)}
label{display:block;margin:0 0 .75rem;font-weight:600}
input[type=text],input[type=password]{display:block;width:100%;margin-top:.25rem;
padding:.55rem .6rem;font:inherit;color:var(--fg);background:var(--bg);
border:1px solid var(--line);border-radius:.35rem}
fieldset{border:1px solid var(--line);border-radius:.35rem;padding:.75rem}
legend{font-weight:600;padding:0 .25rem}
.check{display:flex;gap:.5rem;align-items:flex-start;font-weight:400;margin:.35rem 0}
.check input{margin-top:.3rem;inline-size:1.1rem;block-size:1.1rem}
.actions{display:flex;flex-wrap:wrap;gap:.5rem}
button{font:inherit;font-weight:600;padding:.55rem 1rem;border-radius:.35rem;cursor:pointer;
border:1px solid var(--accent);background:var(--accent);color:var(--accent-fg)}
button.secondary{background:transparent;color:var(--fg);border-color:var(--line)}
button.danger{background:var(--danger);border-color:var(--danger);color:var(--card)}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
[role=alert]{color:var(--danger);font-weight:600}
dl{margin:0 0 1rem}dt{font-weight:600}dd{margin:0 0 .5rem;overflow-wrap:anywhere}
""".strip()

STYLE_HASH = "sha256-" + base64.b64encode(hashlib.sha256(STYLESHEET.encode()).digest()).decode()


def csp(*form_targets: str) -> str:
    """The pages' policy; `form_targets` are origins a form may end up at after its POST
    (the consent form's redirect to the client: browsers apply form-action to redirects)."""
    targets = " ".join(("'self'", *form_targets))
    return (
        f"default-src 'none'; style-src '{STYLE_HASH}'; form-action {targets}; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


CSP = csp()


def document(title: str, body: str) -> str:
    """A whole page: the stylesheet, one heading, the body (already escaped HTML)."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{escape(title)}</title><style>{STYLESHEET}</style></head><body><main>\n"
        f"<h1>{escape(title)}</h1>\n{body}\n</main></body></html>\n"
    )
