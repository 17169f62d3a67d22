"""The MCP Apps extension: what it adds to the server, composed like any other extension."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notes_server.features.apps.capability import UI_EXTENSION, declares_ui
from notes_server.features.apps.open import NotesOpen
from notes_server.features.apps.timeline import NotesTimeline
from notes_server.features.apps.view import VIEW_URI, UiResources
from notes_server.features.extension import Extension
from notes_server.tools.base import Tool
from notes_server.tools.services import Services


def ui_meta(tool: Tool, capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """`_meta.ui.resourceUri` on notes_timeline, only for a request that declares Apps: a
    host without Apps gets the same tool as a plain text tool."""
    if tool.name != NotesTimeline.name or not declares_ui(capabilities):
        return None
    return {"ui": {"resourceUri": VIEW_URI}}


def apps_extension(services: Services) -> Extension:
    return Extension(
        name="apps",
        extensions={UI_EXTENSION: {}},
        tools=[NotesTimeline(services), NotesOpen(services)],
        resource_providers={"ui": UiResources()},
        tool_meta=ui_meta,
        tool_meta_variant=declares_ui,
    )
