"""`notes-server audit`: list destructive actions, newest first."""

from __future__ import annotations

import click

from notes_server.errors import UriError


@click.command(epilog="Example: notes-server audit --workspace file:///home/alice/notes --limit 20")
@click.option("--workspace", default=None, metavar="URI", help="Only this workspace.")
@click.option("--principal", default=None, help="Only this principal.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--db", default=None, metavar="URL", help="Database URL.")
def audit(workspace: str | None, principal: str | None, limit: int, db: str | None) -> None:
    """List deletes, archives, declined confirmations and what `sync` deleted or kept (time,
    principal, tool, outcome, note, workspace, then the note's path when known)."""
    from notes_server.cli.database import open_database
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import audit as audit_log
    from notes_server.store.engine import read_tx
    from notes_server.tools.views import iso

    if workspace is not None:
        try:
            workspace = canonical_workspace(workspace)
        except UriError as exc:
            raise click.BadParameter(str(exc), param_hint="--workspace") from None
    with open_database(db) as engine, read_tx(engine) as conn:
        rows = audit_log.recent(conn, workspace=workspace, principal=principal, limit=limit)
    if not rows:
        click.echo("no audited actions")
    for row in rows:
        note = f"{row.note_id} {row.note_title!r}" if row.note_id else f"(title {row.note_title!r})"
        path = "" if row.note_path is None else f"\t{row.note_path}"
        click.echo(
            f"{iso(row.at)}\t{row.principal}\t{row.tool}\t{row.outcome}\t{note}\t{row.workspace}"
            f"{path}"
        )
