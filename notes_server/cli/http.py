"""`notes-server serve --transport http`: the HTTP options of `serve` and what they start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from notes_server import __version__
from notes_server.cli.errors import StartupFailure
from notes_server.config import HttpSettings, Settings

_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind."),
    click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=8765,
        show_default=True,
        help="HTTP: port (0: any free one).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(1, 64),
        default=1,
        show_default=True,
        help="HTTP: worker processes sharing the database and state keys.",
    ),
    click.option(
        "--auth",
        type=click.Choice(["token", "oauth", "none"]),
        default="token",
        show_default=True,
        help="HTTP: bearer tokens (`notes-server token create`); oauth (also the built-in "
        "OAuth 2.1 authorization server, needs --public-url); or none (loopback only; every "
        "request acts as --principal).",
    ),
    click.option(
        "--registration",
        type=click.Choice(["open", "off"]),
        default="open",
        show_default=True,
        help="HTTP, --auth oauth: dynamic client registration (RFC 7591), rate-limited.",
    ),
    click.option(
        "--oauth-dev-addresses",
        is_flag=True,
        default=False,
        help="HTTP, --auth oauth, development only: fetch client metadata documents from "
        "loopback and private addresses too (and plain http there).",
    ),
    click.option("--jwt-issuer", default=None, help="HTTP: also accept JWTs from this issuer."),
    click.option("--jwt-audience", default=None, help="HTTP: required JWT audience (aud)."),
    click.option(
        "--jwt-jwks",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="HTTP: JWKS file with the issuer's public signing keys.",
    ),
    click.option(
        "--jwt-client-id",
        "jwt_client_ids",
        multiple=True,
        metavar="ID",
        help="HTTP: accept only JWTs whose azp (or client_id) is this client (repeatable).",
    ),
    click.option(
        "--allow-origin",
        "allowed_origins",
        multiple=True,
        metavar="ORIGIN",
        help="HTTP: a browser Origin allowed to call (loopback origins always are on loopback).",
    ),
    click.option(
        "--public-url",
        default=None,
        metavar="URL",
        help="HTTP: external base URL (for the resource metadata and 401 challenges).",
    ),
]


def http_options(func: Any) -> Any:
    """Add the HTTP transport options to a click command."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def serve_http(settings: Settings, options: dict[str, Any]) -> None:
    """Serve HTTP with already resolved settings; refuse unsafe configurations."""
    from notes_server.cli.database import ensure_schema
    from notes_server.cli.faults import database_faults
    from notes_server.cli.sandbox import confine_serving
    from notes_server.transports.http.server import (
        StartupError,
        create_key_file,
        listen,
        prepare,
        run_http,
    )

    tuples = {name: tuple(options[name]) for name in ("allowed_origins", "jwt_client_ids")}
    http = HttpSettings(**{**options, **tuples})
    try:
        prepare(settings, http)
        # Listening before anything else happens (and before the banner): a taken port is
        # one line, exit 2, with nothing created.
        sock, http = listen(http)
        # The schema before the key file: a database that cannot serve leaves nothing behind.
        ensure_schema(settings, announce=True)
        with database_faults(settings.db_display):  # the state key file is created beside it
            create_key_file(settings)
    except StartupError as exc:
        raise StartupFailure(str(exc)) from None
    # Before uvicorn imports the app or starts any thread or worker (workers inherit it).
    # Reads (when mirrors confine them) keep the JWKS file, which the app loads later.
    jwks = (Path(http.jwt_jwks),) if http.jwt_jwks else ()
    # `--auth oauth` fetches Client ID Metadata Documents: https on 443, or (development
    # addresses) any port of this machine or a private network.
    ports: tuple[int, ...] | None = ()
    if http.auth == "oauth":
        ports = None if http.oauth_dev_addresses else (443,)
    confinement = confine_serving(
        settings, transport="http", principal=None, extra_reads=jwks, connect_ports=ports
    )
    who = f"principal {settings.principal}" if http.auth == "none" else "principal from tokens"
    if http.auth == "oauth":
        who = f"principal from tokens and OAuth (issuer {http.public_url})"
    host = f"[{http.host}]" if ":" in http.host else http.host
    click.echo(
        f"notes-server {__version__} | database {settings.db_display} | {who} | "
        f"MCP 2026-07-28 and 2025-11-25 over http://{host}:{http.port}/mcp | "
        f"workers {http.workers} | {confinement}",
        err=True,
    )
    run_http(settings, http, sock)
