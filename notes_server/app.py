"""Composition root: the only place that builds the server from settings, and the only place
that knows the built-in features. `tools/` knows none of them: the notes extension (the shipped
tools, the prompts, the `file:` resources), the folders, MCP Apps and purge features and each
`--tools-module` are composed here through the extension seam."""

from __future__ import annotations

import functools
import importlib
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
from notes_server.features.apps.extension import apps_extension
from notes_server.features.extension import Extension
from notes_server.features.folders.extension import folders_extension
from notes_server.features.prompts.notes import SHIPPED_PROMPTS
from notes_server.features.registry import ExtensionRegistry
from notes_server.features.subscriptions.extension import subscriptions_extension
from notes_server.features.tasks.extension import tasks_extension
from notes_server.features.tasks.runner import TaskRunner
from notes_server.features.tasks.watch import TaskWatch
from notes_server.protocol.server import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.registry import SHIPPED
from notes_server.tools.resources import NoteResources, NoteTemplate
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from notes_server.transports.http.endpoint import LegacyFactory
    from notes_server.transports.stdio import ConnectionFactory

SERVER_INFO = {
    "name": "notes-server",
    "title": "Notes",
    "version": __version__,
    "description": "Workspace-scoped notes with confirmed destructive operations",
}


def notes_extension(services: Services) -> Extension:
    """The built-in notes extension: the shipped tools and prompts, notes as `file:` resources
    with their template, and log messages (tools emit them when a request asks)."""
    return Extension(
        name="notes",
        capabilities={"tools": {}, "resources": {}, "prompts": {}, "logging": {}},
        tools=[cls(services) for cls in SHIPPED],
        resource_providers={"file": NoteResources(services)},
        prompts=[cls(services) for cls in SHIPPED_PROMPTS],
        resource_templates=[NoteTemplate(services)],
    )


def tools_module_extension(module_name: str, services: Services) -> Extension:
    """A `--tools-module` (test harnesses) as an extension named after the module: its
    `TOOLS` and `PROMPTS` (sequences of classes taking the services), `RESOURCES` (a mapping
    of URI scheme to a resource provider class taking the services), `RESOURCE_TEMPLATES`
    (template classes taking the services) and `STATIC_RESOURCE_SCHEMES` (those of its
    schemes a subscription may name), each optional but not all."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"--tools-module {module_name}: cannot import ({exc.msg})") from None
    found = {name: getattr(module, name, None) for name in MODULE_SEQUENCES}
    resources = getattr(module, "RESOURCES", None)
    if resources is None and all(value is None for value in found.values()):
        raise SettingsError(
            f"--tools-module {module_name}: the module has no TOOLS, PROMPTS or RESOURCES"
        )
    sequences = {name: value or () for name, value in found.items()}
    if not all(isinstance(value, list | tuple) for value in sequences.values()):
        raise SettingsError(
            f"--tools-module {module_name}: {', '.join(MODULE_SEQUENCES)} must be sequences"
        )
    resources = resources or {}
    if not isinstance(resources, dict):
        raise SettingsError(f"--tools-module {module_name}: RESOURCES must be a dict")
    return Extension(
        name=f"tools-module:{module_name}",
        tools=[cls(services) for cls in sequences["TOOLS"]],
        prompts=[cls(services) for cls in sequences["PROMPTS"]],
        resource_providers={scheme: cls(services) for scheme, cls in resources.items()},
        resource_templates=[cls(services) for cls in sequences["RESOURCE_TEMPLATES"]],
        static_resource_schemes=frozenset(sequences["STATIC_RESOURCE_SCHEMES"]),
    )


MODULE_SEQUENCES = ("TOOLS", "PROMPTS", "RESOURCE_TEMPLATES", "STATIC_RESOURCE_SCHEMES")


def builtin_extensions(
    services: Services,
    tools_modules: Sequence[str] = (),
    *,
    page_base: Callable[[], str] | None = None,
) -> list[Extension]:
    """What a server built from settings serves: notes, folders (`notes_import`), MCP Apps,
    tasks (long calls as `io.modelcontextprotocol/tasks` tasks), change subscriptions
    (`subscriptions/listen`), `notes_reindex` where the semantic index is, then (with
    `page_base`, the approval page's origin) `notes_purge` and its approval page, then each
    tools module."""
    runner = TaskRunner(services)
    served = [
        notes_extension(services),
        folders_extension(services),
        apps_extension(services),
        tasks_extension(services, runner=runner),
    ]
    if services.semantic_available():
        from notes_server.features.reindex.extension import reindex_extension

        served.append(reindex_extension(services))
    if page_base is not None:
        from notes_server.features.purge.extension import purge_extension

        served.append(purge_extension(services, page_base))
    modules = [tools_module_extension(m, services) for m in tools_modules]
    static = [s for e in (*served, *modules) for s in e.static_resource_schemes]
    served.insert(4, subscriptions_extension(services, static, TaskWatch(runner)))
    return [*served, *modules]


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
        extension_methods=composed.methods,
        tool_call_hook=composed.tool_call_hook,
        streams=composed.streams,
    )


def create_server(
    settings: Settings,
    services: Services | None = None,
    extensions: Sequence[Extension] | None = None,
    page_base: Callable[[], str] | None = None,
) -> McpServer:
    """A server without HTTP; `page_base` (stdio: the loopback approval listener's origin)
    also serves `notes_purge`."""
    services = services or Services(settings)
    return server_for(compose_extensions(settings, services, extensions, page_base))


def create_stdio_server(
    settings: Settings, services: Services, page_base: Callable[[], str] | None = None
) -> tuple[McpServer, ConnectionFactory]:
    """The stdio server and what serves one stdio connection: 2026-07-28 messages statelessly,
    a 2025-11-25 client (after `initialize`) through the adapter, with its grants and roots
    wait. `page_base` is the loopback approval listener's origin (serves `notes_purge`)."""
    from notes_server.compat_2025.connection import DualEraConnection
    from notes_server.tools.scope import grant_lookup

    server = create_server(settings, services, page_base=page_base)
    connection = functools.partial(
        DualEraConnection, grants=grant_lookup(services), roots_wait_s=settings.roots_wait_s
    )
    return server, connection


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

    owned = services is None
    services = services or Services(settings)
    base = page_base(http)
    composed = compose_extensions(
        settings, services, extensions, None if base is None else (lambda: base)
    )
    server = server_for(composed)
    auth = build_authenticator(settings, http, services)
    routes = list(composed.http_routes())
    if http.auth == "oauth":
        from notes_server.features.oauth.routes import oauth_routes

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
        background=app_lifetime(services, owned),
    )


def app_lifetime(services: Services, owned: bool) -> Callable[[], Callable[[], None]] | None:
    """What starts this HTTP process's background work and returns what ends it: the semantic
    indexer (each HTTP worker runs one: their claims never overlap, see store.semantic), and, for
    services the app built itself (`owned`), their engine's pooled connections, closed with the
    app rather than left to the collector (a PostgreSQL connection left so warns and stays open)."""
    semantic = services.semantic_available()
    if not semantic and not owned:
        return None

    def start() -> Callable[[], None]:
        background = None
        if semantic:
            from notes_server.store.indexer import start_background

            poll = services.settings.index_poll_s
            background = start_background(services.engine, services.embedder(), poll)

        def stop() -> None:
            if background is not None:
                background.stop()
            if owned:
                services.close()

        return stop

    return start


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
    from notes_server.compat_2025 import http_sessions
    from notes_server.compat_2025.http import LegacyHttp
    from notes_server.compat_2025.http_sessions import SESSION_TTL, LegacyHttpOptions
    from notes_server.compat_2025.roots import ROOTS_WAIT_S
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
