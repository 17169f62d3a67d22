"""`notes-server token ...`: create, list and revoke HTTP bearer tokens.

The secret is printed exactly once, on creation; only its SHA-256 is stored, so a lost token is
revoked and replaced, never recovered.
"""

from __future__ import annotations

from datetime import timedelta

import click

DB_HELP = "Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file)."


def _fmt(value: object) -> str:
    return "-" if value is None else str(value)[:19]


@click.group(epilog="Example: notes-server token create alice --expires 90 --name laptop")
def token() -> None:
    """Create, list and revoke bearer tokens for `serve --transport http`."""


@token.command(epilog="Example: notes-server token create alice --expires 90 --name laptop")
@click.argument("principal")
@click.option(
    "--expires",
    "days",
    type=click.IntRange(min=1, max=3650),
    default=None,
    help="Days until the token expires (default: never).",
)
@click.option("--name", default=None, metavar="LABEL", help="A label to recognise it by.")
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def create(principal: str, days: int | None, name: str | None, db: str | None) -> None:
    """Create a token that acts as PRINCIPAL; prints the secret once, on stdout."""
    from notes_server.cli.database import open_database
    from notes_server.security.principals import local_problem
    from notes_server.security.tokens import create_token
    from notes_server.store.tokens import SqlTokenRecords

    problem = local_problem(principal)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="PRINCIPAL")
    expires = None if days is None else timedelta(days=days)
    with open_database(db, announce=True) as engine:
        token_id, secret = create_token(
            SqlTokenRecords(engine), principal, name=name, expires_in=expires
        )
    until = f"expires in {days} days" if days else "never expires"
    click.echo(
        f"created token {token_id} for {principal} ({until}); it is shown only once:", err=True
    )
    click.echo(secret)


@token.command(name="list", epilog="Example: notes-server token list alice")
@click.argument("principal", required=False)
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def list_(principal: str | None, db: str | None) -> None:
    """List tokens (never their secrets), for one PRINCIPAL or everyone."""
    from notes_server.cli.database import open_database
    from notes_server.security.tokens import utc_now
    from notes_server.store import tokens
    from notes_server.store.engine import read_tx

    with open_database(db) as engine, read_tx(engine) as conn:
        rows = tokens.list_tokens(conn, principal)
    if not rows:
        click.echo("no tokens")
        return
    now = utc_now()
    click.echo("id\tprincipal\tstatus\tname\tcreated\texpires\tlast used")
    for row in rows:
        click.echo(
            f"{row.id}\t{row.principal}\t{row.status(now)}\t{_fmt(row.name)}\t"
            f"{_fmt(row.created_at)}\t{_fmt(row.expires_at)}\t{_fmt(row.last_used_at)}"
        )


@token.command(epilog="Example: notes-server token revoke 3")
@click.argument("token_id", metavar="ID", type=int)
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def revoke(token_id: int, db: str | None) -> None:
    """Revoke token ID: the next request that presents it gets 401."""
    from notes_server.cli.database import open_database
    from notes_server.security.tokens import utc_now
    from notes_server.store import tokens
    from notes_server.store.engine import write_tx

    with open_database(db) as engine, write_tx(engine) as conn:
        revoked = tokens.revoke(conn, token_id, utc_now())
    if not revoked:
        raise click.ClickException(f"no active token with id {token_id}")
    click.echo(f"revoked token {token_id}")
