"""The `ui://` resources: the timeline view, one self-contained HTML file shipped in the package.

Reading it needs this request to declare the Apps extension (-32021 otherwise, naming it); an
unknown `ui://` URI is -32602 with the uri. The view loads nothing from anywhere (every CSP
domain list is empty) and holds no user data (notes arrive as tool results through the host).
Its SHA-256 travels with the listing and the contents, so a host knows when to fetch it again.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from notes_server.errors import InvalidParams, MissingCapability, resource_not_found
from notes_server.features.apps.capability import APP_MIME, UI_EXTENSION, declares_ui
from notes_server.tools.base import CallContext

VIEW_URI = "ui://notes/timeline.html"
VIEW_FILE = "timeline.html"
DIGEST_KEY = "dev.notes-server/sha256"
UI_META: dict[str, Any] = {
    "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
    "permissions": {},
    "prefersBorder": True,
}
REQUIRED = {"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME]}}}


@cache
def view_html() -> tuple[str, str]:
    """(the view's HTML, its SHA-256 in hex), read once from the package."""
    from hashlib import sha256  # not at start either: hashlib loads OpenSSL (~2.5 ms)
    from importlib import resources  # only when the view is first read: ~1 ms at start

    text = (
        resources.files("notes_server.features.apps")
        .joinpath(VIEW_FILE)
        .read_text(encoding="utf-8")
    )
    return text, sha256(text.encode("utf-8")).hexdigest()


class UiResources:
    """The `ui:` scheme's provider: one view, one page. It is listed only to a request that
    declares Apps (the spec lets UI resources stay out of the list): other clients could not
    read it, and their listing stays the notes alone."""

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        if cursor is not None:
            raise InvalidParams("Invalid cursor")
        if not declares_ui(ctx.capabilities):
            return [], None
        entry = {
            "uri": VIEW_URI,
            "name": "notes_timeline",
            "title": "Notes timeline",
            "description": "Interactive timeline of a workspace's notes (the notes_timeline view).",
            "mimeType": APP_MIME,
            "_meta": {"ui": UI_META, DIGEST_KEY: view_html()[1]},
        }
        return [entry], None

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        if not declares_ui(ctx.capabilities):
            raise MissingCapability(
                f"Reading {uri[:64]} needs the {UI_EXTENSION} extension in this request's "
                "client capabilities",
                {"requiredCapabilities": REQUIRED},
            )
        if uri != VIEW_URI:
            raise resource_not_found(uri)
        text, digest = view_html()
        meta = {"ui": UI_META, DIGEST_KEY: digest}
        return [{"uri": VIEW_URI, "mimeType": APP_MIME, "text": text, "_meta": meta}]
