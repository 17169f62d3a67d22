"""Composition root: the only place that builds the server from settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from notes_server import __version__
from notes_server.config import (
    ENV_SEMANTIC,
    ENV_STATE_KEYS,
    HttpSettings,
    Settings,
    SettingsError,
    worker_config,
)
from notes_server.extensions.base import Extension
from notes_server.extensions.registry import ExtensionRegistry
from notes_server.protocol.dispatch import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.registry import builtin_extensions
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from notes_server.transports.http.endpoint import LegacyFactory

SERVER_INFO = {
    "name": "notes-server",
    "title": "Notes",
    "version": __version__,
    "description": "Workspace-scoped notes with confirmed destructive operations",
}


def compose_extensions(
    settings: Settings,
    services: Services,
    extensions: Sequence[Extension] | None = None,
    page_base: Callable[[], str] | None = None,
) -> ExtensionRegistry:
    """The extensions a server serves: the given ones, or the built-in notes extension (with
    the purge approval page when HTTP gives a `page_base`) and each `--tools-module`. Clashes
    fail here, at start (SettingsError)."""
    if extensions is None:
        extensions = builtin_extensions(services, settings.tools_modules, page_base=page_base)
    return ExtensionRegistry(extensions)


def page_base(http: HttpSettings) -> str | None:
    """Where this server's own pages are: `--public-url`, else the bound address. `serve`
    hands workers the port it actually bound (`--port 0` included); only an app composed
    in-process with port 0 and no public URL has no address, and then serves no `notes_purge`."""
    if http.public_url:
        return http.public_url.rstrip("/")
    if http.port == 0:
        return None
    host = f"[{http.host}]" if ":" in http.host else http.host
    return f"http://{host}:{http.port}"


def server_for(composed: ExtensionRegistry) -> McpServer:
    return McpServer(
        composed.tools,
        composed.resources,
        SERVER_INFO,
        capabilities=composed.capabilities,
        prompts=composed.prompts,
        templates=composed.templates,
    )


def create_app(
    settings: Settings,
    services: Services | None = None,
    extensions: Sequence[Extension] | None = None,
    page_base: Callable[[], str] | None = None,
) -> McpServer:
    """A server without HTTP; `page_base` (stdio: the loopback approval listener's origin)
    also serves `notes_purge`."""
    services = services or Services(settings)
    return server_for(compose_extensions(settings, services, extensions, page_base))


def check_settings(settings: Settings) -> None:
    """What `build_settings` cannot check without the security layer, checked before serving:
    malformed state keys fail at start, not at every confirmation (SettingsError, one line);
    so does a semantic model that is missing (when required) or damaged."""
    check_semantic(settings)
    if settings.state_keys is None:
        return
    try:
        KeyRing.parse(settings.state_keys)
    except ValueError as exc:  # the message names the entry, never the key
        raise SettingsError(f"{ENV_STATE_KEYS}: {exc}") from None


def check_semantic(settings: Settings) -> None:
    """The embedding model's bundled files, checked without loading the model."""
    if settings.semantic == "off":
        return
    from notes_server.store import embedding

    if settings.semantic == "auto" and not embedding.installed():
        return
    try:
        embedding.check()
    except embedding.ModelUnavailable as exc:
        raise SettingsError(f"{ENV_SEMANTIC}: {exc}") from None


def create_http_app(
    settings: Settings,
    http: HttpSettings,
    services: Services | None = None,
    extensions: Sequence[Extension] | None = None,
) -> ASGIApp:
    """Compose server, authenticator and ASGI app (with the extensions' routes) for one HTTP
    process. Workers rebuild from settings, so what they serve is the default extensions."""
    # Starlette and the HTTP modules load only for HTTP: a stdio start never pays for them.
    from notes_server.transports.http.app import build_http_app
    from notes_server.transports.http.middleware.auth import build_authenticator

    services = services or Services(settings)
    base = page_base(http)
    composed = compose_extensions(
        settings, services, extensions, None if base is None else (lambda: base)
    )
    server = server_for(composed)
    auth = build_authenticator(settings, http, services)
    routes = list(composed.http_routes())
    if http.auth == "oauth":
        from notes_server.oauth.routes import oauth_routes

        assert http.public_url, "checked at start-up"
        routes.extend(
            oauth_routes(services, http.public_url, http.registration, http.oauth_dev_addresses)
        )
    return build_http_app(
        server,
        auth,
        http,
        extra_routes=routes,
        legacy=legacy_http(server, http, services),
        health=schema_check(services),
    )


def schema_check(services: Services) -> Callable[[], tuple[str | None, str]]:
    """For `GET /healthz`: (the database's schema revision, the one this build needs); raises
    when the database cannot be reached."""

    def check() -> tuple[str | None, str]:
        from notes_server.store import migrate

        return migrate.current_revision(services.engine), migrate.HEAD

    return check


def legacy_http(server: McpServer, http: HttpSettings, services: Services) -> LegacyFactory:
    """2025-era HTTP sessions kept in the server's database; a user has as long to answer a
    confirmation as its sealed state lives."""
    from notes_server.legacy import http_sessions
    from notes_server.legacy.http import LegacyHttp
    from notes_server.legacy.http_sessions import SESSION_TTL, LegacyHttpOptions
    from notes_server.legacy.roots import ROOTS_WAIT_S
    from notes_server.store.sessions import SqlLegacySessions
    from notes_server.tools.scope import grant_lookup

    repository: list[SqlLegacySessions] = []

    def build() -> SqlLegacySessions:
        if not repository:  # the engine (and SQLAlchemy) only when a legacy client arrives
            repository.append(SqlLegacySessions(services.engine, SESSION_TTL))
        return repository[0]

    settings = services.settings
    roots_wait = ROOTS_WAIT_S if settings.roots_wait_s is None else settings.roots_wait_s
    options = LegacyHttpOptions(
        build,
        services.clock,
        settings.state_ttl,
        grant_lookup(services),
        roots_wait,
        sweep_every_s=http_sessions.SWEEP_EVERY_S,
    )
    return lambda threads: LegacyHttp(server, options, threads, http.request_timeout)


def http_worker_app() -> ASGIApp:
    """uvicorn factory: the app of one worker process, from the settings its parent exported."""
    settings, http = worker_config()
    return create_http_app(settings, http)
