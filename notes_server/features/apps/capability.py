"""Whether one request's client declares the MCP Apps extension.

The spec requires `mimeTypes` (which must include `text/html;profile=mcp-app`), but many hosts
send a bare `{}`: both count. Anything else (`true`, `null`, a list, an empty `extensions` map,
a `mimeTypes` that is not a list or leaves our type out) means "no Apps", and the tools stay
plain text tools for that request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UI_EXTENSION = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"


def declares_ui(capabilities: Mapping[str, Any]) -> bool:
    extensions = capabilities.get("extensions")
    if not extensions or not isinstance(extensions, Mapping):  # cheap test first: most lack it
        return False
    entry = extensions.get(UI_EXTENSION)
    if not isinstance(entry, Mapping):
        return False
    if "mimeTypes" not in entry:
        return True
    mime_types = entry["mimeTypes"]
    return isinstance(mime_types, list) and APP_MIME in mime_types
