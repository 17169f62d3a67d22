"""`notes-server index [--watch]`, `index status`, `reindex [--workspace URI]`: the semantic
index from the command line, in its own process (`serve` also runs an indexer in the
background)."""

from __future__ import annotations

import sys
import threading
from typing import Any

import click

from notes_server.config import build_settings
from notes_server.errors import UriError


def _embedder() -> Any:
    """The model, checked now: missing or damaged is one line and exit status 2."""
    from notes_server.cli.errors import StartupFailure
    from notes_server.store import embedding

    try:
        embedding.check()
    except embedding.ModelUnavailable as exc:
        raise StartupFailure(str(exc)) from None
    return embedding.Embedder()


@click.group(invoke_without_command=True, epilog="Example: notes-server index --watch")
@click.option("--watch", is_flag=True, help="Keep running: embed new and changed notes.")
@click.option("--db", default=None, metavar="URL", help="Database URL.")
@click.pass_context
def index(ctx: click.Context, watch: bool, db: str | None) -> None:
    """Embed the notes waiting in the semantic index's outbox, then stop (or, with --watch,
    keep going). Several may run on one PostgreSQL database: they share the work."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = db
        return
    from notes_server.cli.database import open_database
    from notes_server.store import indexer

    embedder = _embedder()
    with open_database(db) as engine:
        if watch:
            stop = threading.Event()
            try:
                indexer.watch(engine, embedder, stop)
            except KeyboardInterrupt:
                stop.set()
            return
        indexer.requeue_stale(engine, embedder.model)
        passages = indexer.drain(engine, embedder)
    click.echo(f"embedded {passages} passages", err=True)


@index.command("status", epilog="Example: notes-server index status")
@click.option("--db", default=None, metavar="URL", help="Database URL.")
@click.pass_obj
def index_status(obj: str | None, db: str | None) -> None:
    """Notes waiting, notes embedded, passages per model."""
    from notes_server.cli.database import open_database
    from notes_server.store import embedding, semantic
    from notes_server.store.engine import read_tx

    with open_database(db or obj) as engine, read_tx(engine) as conn:
        state = semantic.status(conn)
    model = embedding.model_name() if embedding.installed() else "none (keyword only)"
    click.echo(f"model\t{model}")
    click.echo(f"pending\t{state.pending}")
    click.echo(f"embedded notes\t{state.embedded_notes}")
    click.echo(f"passages\t{state.passages}")
    for name, count in sorted(state.models.items()):
        click.echo(f"passages by {name}\t{count}")


@click.command(epilog="Example: notes-server reindex --workspace file:///home/alice/notes")
@click.option("--workspace", default=None, metavar="URI", help="Only this workspace.")
@click.option("--db", default=None, metavar="URL", help="Database URL.")
def reindex(workspace: str | None, db: str | None) -> None:
    """Embed every note again (or one workspace's), with a progress bar on stderr."""
    from notes_server.cli.database import open_database
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import indexer, semantic
    from notes_server.store.engine import write_tx

    if workspace is not None:
        try:
            workspace = canonical_workspace(workspace)
        except UriError as exc:
            raise click.BadParameter(str(exc), param_hint="--workspace") from None
    build_settings(db=db)
    embedder = _embedder()
    with open_database(db) as engine:
        with write_tx(engine) as conn:
            queued = semantic.enqueue(conn, workspace)
        bar: Any = click.progressbar(length=queued, label="embedding notes", file=sys.stderr)
        with bar:
            passages = indexer.drain(engine, embedder, progress=lambda n, _p: bar.update(n))
    click.echo(f"queued {queued} notes, embedded {passages} passages", err=True)
