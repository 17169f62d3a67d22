"""Composition root: the only place that builds the server from settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from notes_server import __version__
from notes_server.config import ENV_STATE_KEYS, HttpSettings, Settings, SettingsError, worker_config
from notes_server.protocol.dispatch import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.registry import build_registry
from notes_server.tools.resources import NoteResources
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from notes_server.transports.http_endpoint import LegacyFactory

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


def create_http_app(
    settings: Settings, http: HttpSettings, services: Services | None = None
) -> Starlette:
    """Compose server, authenticator and ASGI app for one HTTP process."""
    # Starlette and the HTTP modules load only for HTTP: a stdio start never pays for them.
    from notes_server.transports.http import build_http_app
    from notes_server.transports.http_auth import build_authenticator

    services = services or Services(settings)
    server = create_app(settings, services)
    auth = build_authenticator(settings, http, services)
    return build_http_app(server, auth, http, legacy=legacy_http(server, http, services))


def legacy_http(server: McpServer, http: HttpSettings, services: Services) -> LegacyFactory:
    """2025-era HTTP sessions kept in the server's database; a user has as long to answer a
    confirmation as its sealed state lives."""
    from notes_server.legacy.http import SESSION_TTL, LegacyHttp, LegacyHttpOptions
    from notes_server.store.sessions import SqlLegacySessions

    repository: list[SqlLegacySessions] = []

    def build() -> SqlLegacySessions:
        if not repository:  # the engine (and SQLAlchemy) only when a legacy client arrives
            repository.append(SqlLegacySessions(services.engine, SESSION_TTL))
        return repository[0]

    options = LegacyHttpOptions(build, services.clock, services.settings.state_ttl)
    return lambda threads: LegacyHttp(server, options, threads, http.request_timeout)


def http_worker_app() -> Starlette:
    """uvicorn factory: the app of one worker process, from the settings its parent exported."""
    settings, http = worker_config()
    return create_http_app(settings, http)
