"""The `notes-server` command line: thin click commands over library functions."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from notes_server import __version__
from notes_server.cli.database import ensure_schema
from notes_server.cli.errors import StartupFailure
from notes_server.cli.faults import database_faults
from notes_server.cli.http import http_options, serve_http
from notes_server.cli.lazy import LazyCommands
from notes_server.cli.sandbox import confine_serving
from notes_server.config import Settings, SettingsError, build_settings

if TYPE_CHECKING:
    pass

# Semantic ranking's one matrix product per query runs on one BLAS thread in this command's
# processes (HTTP workers inherit it) unless the operator says otherwise: a thread per core
# contends with the other requests and the client. 100k x 64 float32 on the loaded 2-core
# machine: p50 1.3-1.7 ms, p90 5.3-6.0 ms on one thread against p50 0.6-12 ms, p90 13.6-25.5 ms
# on two (scripts/bench_lib/history.md (30)). Set before numpy loads (it loads lazily).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DB_HELP = "Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file)."


def _db_option(func: Any) -> Any:
    return click.option("--db", "db", metavar="URL", default=None, help=DB_HELP)(func)


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level, logging.INFO))


class _Main(click.Group):
    """The command group; translates settings errors from any command in one place."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SettingsError as exc:
            raise StartupFailure(str(exc)) from None


@click.group(
    cls=_Main,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Example: notes-server serve --principal alice",
)
@click.version_option(__version__, prog_name="notes-server")
def main() -> None:
    """notes-server: a stateless MCP (2026-07-28) server for workspace-scoped notes."""


@main.command(epilog="Example: notes-server migrate --db sqlite:////var/lib/notes/notes.db")
@_db_option
def migrate(db: str | None) -> None:
    """Upgrade the database schema to the latest revision (idempotent)."""
    from notes_server.store import migrate as migrations
    from notes_server.store.engine import make_engine

    settings = build_settings(db=db)
    with database_faults(settings.db_display):
        engine = make_engine(settings.db_url)
        try:
            before, after = migrations.upgrade(engine)
        finally:
            engine.dispose()
    if before == after:
        click.echo(f"{settings.db_display}: already at revision {after}; nothing to do")
    else:
        click.echo(f"{settings.db_display}: upgraded from {before or 'empty'} to {after}")


@main.command(epilog="Example: notes-server serve --principal alice --state-ttl 300")
@_db_option
@click.option(
    "--principal",
    default=None,
    help="Who the stdio client acts as (default: $NOTES_SERVER_PRINCIPAL, else your login name).",
)
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option(
    "--state-ttl",
    type=click.FloatRange(min=5, max=3600),
    default=None,
    help="Seconds a confirmation form stays valid (default 300).",
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "require", "off"]),
    default="auto",
    show_default=True,
    help="Confine the process with Linux Landlock and seccomp (writes only to the database "
    "and its -wal/-shm; no metadata changes; no sockets for stdio on embedded SQLite, no "
    "outgoing TCP for HTTP; with mirrored folders, reads only of those, the database and "
    "Python's own files). `require` refuses to serve without it.",
)
@click.option(
    "--tools-module",
    "tools_modules",
    multiple=True,
    metavar="MODULE",
    help="Import extra tools from MODULE.TOOLS (test harnesses only).",
)
@http_options
def serve(
    db: str | None,
    principal: str | None,
    transport: str,
    state_ttl: float | None,
    sandbox: str,
    tools_modules: tuple[str, ...],
    **http: Any,
) -> None:
    """Serve MCP over stdio (default) or HTTP. Logs go to stderr; over stdio, stdout carries
    only MCP messages."""
    from notes_server.app import check_settings, create_stdio_server
    from notes_server.tools.services import Services
    from notes_server.transports.http.approval_listener import LoopbackApprovals
    from notes_server.transports.stdio import serve_stdio

    settings = build_settings(
        db=db,
        principal=principal,
        state_ttl=state_ttl,
        tools_modules=tools_modules,
        sandbox=sandbox,
    )
    check_settings(settings)
    if transport == "stdio" or http["auth"] == "none":
        _check_principal(settings.principal)
    setup_logging(settings.log_level)
    if transport == "http":
        serve_http(settings, http)
        return
    ensure_schema(settings, announce=True)
    settings = _stdio_state_keys(settings)
    # Confine before create_stdio_server imports any --tools-module and before the warm-up
    # thread: Landlock and seccomp bind only the threads created after them.
    # The purge approval page's socket is bound (not listened on) before confinement.
    approvals = LoopbackApprovals.bind()
    confinement = confine_serving(settings, transport=transport, principal=settings.principal)
    services = Services(settings)
    approvals.attach(services, settings.principal)
    server, connection = create_stdio_server(settings, services, approvals.base)
    click.echo(
        f"notes-server {__version__} | database {settings.db_display} | "
        f"principal {settings.principal} | MCP 2026-07-28 (2025-11-25 after initialize) "
        f"over {transport} | {confinement}",
        err=True,
    )
    threading.Thread(target=_warm_up, args=(services, True), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        serve_stdio(
            server,
            settings.principal,
            sys.stdin.buffer,
            sys.stdout.buffer,
            connection=connection,
        )


def _stdio_state_keys(settings: Settings) -> Settings:
    """A stdio server on a database server with no shared keys seals its confirmations with a
    key of its own: both rounds of a stdio confirmation reach this one process, so nothing else
    ever needs to open them (HTTP, where any worker may, refuses to start instead)."""
    if settings.state_keys or settings.state_key_file is not None:
        return settings
    from notes_server.security.keyring import KeyRing

    return dataclasses.replace(settings, state_keys=KeyRing.generate_spec())


def _check_principal(principal: str) -> None:
    """The principal every request acts as must be a local name, never a JWT user's."""
    from notes_server.security.principals import local_problem

    problem = local_problem(principal)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--principal / $NOTES_SERVER_PRINCIPAL")


def _warm_up(services: Any, indexer: bool = False) -> None:
    """Connect ahead of the first call; then, with semantic search, the background indexer
    (the model loads in that thread, when there is something to embed or to search)."""
    try:
        services.warm_up()
    except Exception:
        logging.getLogger("notes_server").exception("database warm-up failed")
        return
    if indexer and services.semantic_available():
        from notes_server.store.indexer import start_background

        start_background(services.engine, services.embedder(), services.settings.index_poll_s)


def _index() -> click.Command:
    from notes_server.cli.index import index

    return index


def _reindex() -> click.Command:
    from notes_server.cli.index import reindex

    return reindex


def _workspace() -> click.Command:
    from notes_server.cli.folders import mirror
    from notes_server.cli.workspace import workspace

    workspace.add_command(mirror)
    return workspace


def _token() -> click.Command:
    from notes_server.cli.token import token

    return token


def _user() -> click.Command:
    from notes_server.cli.oauth import user

    return user


def _client() -> click.Command:
    from notes_server.cli.oauth import client

    return client


def _call() -> click.Command:
    from notes_server.cli.call import call

    return call


def _audit() -> click.Command:
    from notes_server.cli.audit import audit

    return audit


def _history() -> click.Command:
    from notes_server.cli.history import history

    return history


def _host_config() -> click.Command:
    from notes_server.cli.host_config import host_config

    return host_config


def _import() -> click.Command:
    from notes_server.cli.folders import import_

    return import_


def _export() -> click.Command:
    from notes_server.cli.folders import export

    return export


def _sync() -> click.Command:
    from notes_server.cli.folders import sync

    return sync


# The only lazy boundary of the command line: `serve` (every stdio start) must not import the
# modules of the other commands (`call`'s client alone is ~5 ms); `--help` loads them all.
main.commands = LazyCommands(
    main.commands,
    {
        "workspace": _workspace,
        "token": _token,
        "user": _user,
        "client": _client,
        "call": _call,
        "audit": _audit,
        "history": _history,
        "host-config": _host_config,
        "import": _import,
        "export": _export,
        "sync": _sync,
        "index": _index,
        "reindex": _reindex,
    },
)
