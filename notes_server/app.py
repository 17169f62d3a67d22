"""Composition root: the only place that builds the server from settings."""

from __future__ import annotations

from notes_server import __version__
from notes_server.config import ENV_STATE_KEYS, Settings, SettingsError
from notes_server.protocol.dispatch import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.registry import build_registry
from notes_server.tools.resources import NoteResources
from notes_server.tools.services import Services

SERVER_INFO = {
    "name": "notes-server",
    "title": "Notes",
    "version": __version__,
    "description": "Workspace-scoped notes with confirmed destructive operations",
}


def create_app(settings: Settings, services: Services | None = None) -> McpServer:
    services = services or Services(settings)
    registry = build_registry(services, settings.tools_modules)
    return McpServer(registry, NoteResources(services), SERVER_INFO)


def check_settings(settings: Settings) -> None:
    """What `build_settings` cannot check without the security layer, checked before serving:
    malformed state keys fail at start, not at every confirmation (SettingsError, one line)."""
    if settings.state_keys is None:
        return
    try:
        KeyRing.parse(settings.state_keys)
    except ValueError as exc:  # the message names the entry, never the key
        raise SettingsError(f"{ENV_STATE_KEYS}: {exc}") from None
