"""`notes-server workspace ...`: grant, revoke and list workspace access."""

from __future__ import annotations

import click

from notes_server.errors import UriError

DB_HELP = "Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file)."


def _principal(principal: str) -> str:
    """Refuse an empty name before the URI: `grant "$USER" file:///home/$USER/notes` with
    $USER unset must say so, not complain about the URI's empty segment."""
    if not principal.strip():
        raise click.BadParameter(
            "is empty (was it given as an unset variable such as $USER?); pass the name the "
            "server runs as, e.g. notes-server workspace grant alice file:///home/alice/notes",
            param_hint="PRINCIPAL",
        )
    return principal


def _canonical(uri: str) -> str:
    from notes_server.security.uri import canonical_workspace

    try:
        return canonical_workspace(uri)
    except UriError as exc:
        hint = "; an unset shell variable?" if str(exc) == "empty path segment" else ""
        raise click.BadParameter(
            f"not an acceptable workspace URI ({exc}{hint}); "
            "expected e.g. file:///home/alice/notes",
            param_hint="WORKSPACE_URI",
        ) from None


def _grantable(principal: str) -> str:
    from notes_server.security.principals import grantable_problem

    problem = grantable_problem(principal)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="PRINCIPAL")
    return principal


@click.group(epilog="Example: notes-server workspace grant alice file:///home/alice/notes")
def workspace() -> None:
    """Grant, revoke and list which principal may use which workspace."""


@workspace.command(epilog="Example: notes-server workspace grant alice file:///home/alice/notes")
@click.argument("principal")
@click.argument("workspace_uri")
@click.option("--role", type=click.Choice(["read", "write"]), default="write", show_default=True)
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def grant(principal: str, workspace_uri: str, role: str, db: str | None) -> None:
    """Allow PRINCIPAL to use WORKSPACE_URI (a file:/// URI). A JWT user's PRINCIPAL is
    ISSUER|SUBJECT, e.g. 'https://idp.example|alice' (quoted: `|` is a shell pipe)."""
    from notes_server.cli.database import open_database
    from notes_server.store import grants
    from notes_server.store.engine import write_tx
    from notes_server.tools.services import utc_now

    principal = _grantable(_principal(principal))
    canonical = _canonical(workspace_uri)
    with open_database(db, announce=True) as engine, write_tx(engine) as conn:
        created = grants.upsert(conn, principal, canonical, role, utc_now())
    verb = "granted" if created else "updated"
    click.echo(f"{verb}: {principal} may use {canonical} ({role})")


@workspace.command(epilog="Example: notes-server workspace revoke alice file:///home/alice/notes")
@click.argument("principal")
@click.argument("workspace_uri")
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def revoke(principal: str, workspace_uri: str, db: str | None) -> None:
    """Take WORKSPACE_URI away from PRINCIPAL."""
    from notes_server.cli.database import open_database
    from notes_server.store import grants
    from notes_server.store.engine import write_tx

    principal = _principal(principal)
    canonical = _canonical(workspace_uri)
    with open_database(db) as engine, write_tx(engine) as conn:
        removed = grants.revoke(conn, principal, canonical)
    if not removed:
        raise click.ClickException(f"{principal} had no grant on {canonical}")
    click.echo(f"revoked: {principal} may no longer use {canonical}")


@workspace.command(name="list", epilog="Example: notes-server workspace list alice")
@click.argument("principal", required=False)
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def list_(principal: str | None, db: str | None) -> None:
    """List grants, for one PRINCIPAL or everyone."""
    from notes_server.cli.database import open_database
    from notes_server.store import grants
    from notes_server.store.engine import read_tx

    with open_database(db) as engine, read_tx(engine) as conn:
        rows = grants.list_grants(conn, principal)
    if not rows:
        click.echo("no grants")
    for row in rows:
        click.echo(f"{row.principal}\t{row.role}\t{row.workspace}")
