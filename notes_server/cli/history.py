"""`notes-server history prune`: drop old versions of notes (the operator's retention)."""

from __future__ import annotations

from datetime import timedelta

import click

from notes_server.errors import UriError


@click.group(epilog="Example: notes-server history prune --older-than 90")
def history() -> None:
    """Note history (every replaced version of a note is kept until pruned)."""


@history.command(
    epilog="Example: notes-server history prune --older-than 90 --workspace "
    "file:///home/alice/notes"
)
@click.option(
    "--older-than",
    "days",
    type=click.IntRange(0, 100_000),
    required=True,
    metavar="DAYS",
    help="Remove versions replaced more than DAYS days ago (0: every past version).",
)
@click.option("--workspace", default=None, metavar="URI", help="Only notes now in this workspace.")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@click.option("--db", default=None, metavar="URL", help="Database URL.")
def prune(days: int, workspace: str | None, dry_run: bool, db: str | None) -> None:
    """Remove past versions replaced more than DAYS days ago; current versions are never
    touched. Prints how many versions of how many notes were removed."""
    from notes_server.cli.database import open_database
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import history as store_history
    from notes_server.store.engine import write_tx
    from notes_server.tools.services import utc_now

    if workspace is not None:
        try:
            workspace = canonical_workspace(workspace)
        except UriError as exc:
            raise click.BadParameter(str(exc), param_hint="--workspace") from None
    cutoff = utc_now() - timedelta(days=days)

    class _DryRun(Exception):
        pass

    pruned = store_history.Pruned(0, 0)
    with open_database(db) as engine:
        try:
            with write_tx(engine) as conn:
                pruned = store_history.prune(conn, replaced_before=cutoff, workspace=workspace)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
    scope = "every workspace" if workspace is None else workspace
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"{verb} {pruned.revisions} past version(s) of {pruned.notes} note(s) replaced before "
        f"{cutoff:%Y-%m-%dT%H:%M:%SZ} in {scope}"
    )
