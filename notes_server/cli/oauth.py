"""`notes-server user ...` and `notes-server client ...`: the built-in authorization server's
local accounts and OAuth clients (`serve --transport http --auth oauth`).

Passwords are read from the terminal (twice) or, for scripts, from stdin with
`--password-stdin`; never from an argument, which other users can see in the process list.
"""

from __future__ import annotations

import json
import sys

import click

DB_HELP = "Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file)."


def _fmt(value: object) -> str:
    return "-" if value is None else str(value)[:19]


def _read_password(from_stdin: bool) -> str:
    from notes_server.security.passwords import password_problem

    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    problem = password_problem(password)
    if problem is not None:
        raise click.UsageError(f"the password {problem}")
    return password


def _principal(principal: str) -> str:
    from notes_server.security.principals import local_problem

    problem = local_problem(principal)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="PRINCIPAL")
    return principal


@click.group(epilog="Example: notes-server user add alice")
def user() -> None:
    """Local accounts that sign in to the OAuth consent page (argon2id password hashes)."""


def _set(principal: str, from_stdin: bool, db: str | None, *, create: bool) -> None:
    from notes_server.cli.database import open_database
    from notes_server.security.passwords import hash_password
    from notes_server.security.tokens import utc_now
    from notes_server.store import oauth
    from notes_server.store.engine import read_tx, write_tx

    principal = _principal(principal)
    with open_database(db) as engine:
        with read_tx(engine) as conn:
            exists = oauth.password_hash(conn, principal) is not None
        if create and exists:
            raise click.UsageError(f"{principal} already has an account: use `user passwd`")
        if not create and not exists:
            raise click.UsageError(f"{principal} has no account: use `user add`")
        hashed = hash_password(_read_password(from_stdin))
        with write_tx(engine) as conn:
            oauth.set_password(conn, principal, hashed, utc_now())
            oauth.clear_failures(conn, principal)
    click.echo(f"{'created account' if create else 'new password for'} {principal}", err=True)


_STDIN = click.option(
    "--password-stdin", "from_stdin", is_flag=True, help="Read the password from stdin."
)
_DB = click.option("--db", default=None, metavar="URL", help=DB_HELP)


@user.command(epilog="Example: notes-server user add alice")
@click.argument("principal")
@_STDIN
@_DB
def add(principal: str, from_stdin: bool, db: str | None) -> None:
    """Create an account for PRINCIPAL (workspaces are granted with `workspace grant`)."""
    _set(principal, from_stdin, db, create=True)


@user.command(epilog="Example: notes-server user passwd alice")
@click.argument("principal")
@_STDIN
@_DB
def passwd(principal: str, from_stdin: bool, db: str | None) -> None:
    """Set a new password for PRINCIPAL (also lifts a sign-in lockout)."""
    _set(principal, from_stdin, db, create=False)


@user.command(epilog="Example: notes-server user remove alice")
@click.argument("principal")
@_DB
def remove(principal: str, db: str | None) -> None:
    """Remove PRINCIPAL's account (its grants, tokens and consents stay)."""
    from notes_server.cli.database import open_database
    from notes_server.store import oauth
    from notes_server.store.engine import write_tx

    with open_database(db) as engine, write_tx(engine) as conn:
        removed = oauth.remove_account(conn, _principal(principal))
    if not removed:
        raise click.UsageError(f"{principal} has no account")
    click.echo(f"removed account {principal}", err=True)


@click.group(epilog="Example: notes-server client list")
def client() -> None:
    """OAuth clients of the built-in authorization server, and the consents they hold."""


@client.command(
    name="add",
    epilog="Example: notes-server client add 'Desk app' --redirect-uri http://127.0.0.1/callback",
)
@click.argument("name")
@click.option(
    "--redirect-uri",
    "redirect_uris",
    multiple=True,
    required=True,
    metavar="URI",
    help="An allowed redirect URI (repeatable; loopback ones match any port).",
)
@click.option("--confidential", is_flag=True, help="Issue a client secret (shown once).")
@_DB
def client_add(
    name: str, redirect_uris: tuple[str, ...], confidential: bool, db: str | None
) -> None:
    """Pre-register a client; prints its client_id (and secret) on stdout."""
    import secrets

    from notes_server.cli.database import open_database
    from notes_server.features.oauth.clients import GRANT_TYPES, redirect_problem
    from notes_server.features.oauth.secrets import digest
    from notes_server.security.tokens import utc_now
    from notes_server.store import oauth
    from notes_server.store.engine import write_tx

    for uri in redirect_uris:
        problem = redirect_problem(uri)
        if problem is not None:
            raise click.BadParameter(f"{uri!r} {problem}", param_hint="--redirect-uri")
    client_id = "op_" + secrets.token_urlsafe(18)
    secret = secrets.token_urlsafe(32) if confidential else None
    metadata = {
        "client_name": name,
        "redirect_uris": list(redirect_uris),
        "grant_types": list(GRANT_TYPES),
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post" if confidential else "none",
    }
    with open_database(db) as engine, write_tx(engine) as conn:
        oauth.put_client(
            conn,
            client_id=client_id,
            kind="operator",
            name=name,
            secret_hash=None if secret is None else digest(secret),
            metadata=metadata,
            now=utc_now(),
        )
    click.echo(f"registered client {name!r}", err=True)
    click.echo(f"client_id {client_id}")
    if secret is not None:
        click.echo(f"client_secret {secret}")


@client.command(name="list", epilog="Example: notes-server client list")
@_DB
def client_list(db: str | None) -> None:
    """Every client: id, kind (operator, dcr, cimd), status, name, redirect URIs."""
    from notes_server.cli.database import open_database
    from notes_server.store import oauth
    from notes_server.store.engine import read_tx

    with open_database(db) as engine, read_tx(engine) as conn:
        found = oauth.list_clients(conn)
    for record in found:
        status = "revoked" if record.revoked_at is not None else "active"
        name = json.dumps(record.metadata.get("client_name") or record.name or "")
        uris = " ".join(record.redirect_uris)
        click.echo(f"{record.client_id}\t{record.kind}\t{status}\t{name}\t{uris}")


@client.command(name="revoke", epilog="Example: notes-server client revoke op_AbC123")
@click.argument("client_id")
@_DB
def client_revoke(client_id: str, db: str | None) -> None:
    """Revoke a client and every consent and token it holds."""
    from notes_server.cli.database import open_database
    from notes_server.security.tokens import utc_now
    from notes_server.store import oauth
    from notes_server.store.engine import write_tx

    with open_database(db) as engine, write_tx(engine) as conn:
        done = oauth.revoke_client(conn, client_id, utc_now())
    if not done:
        raise click.UsageError(f"no active client {client_id}")
    click.echo(f"revoked client {client_id} and its consents", err=True)


@client.command(name="grants", epilog="Example: notes-server client grants --revoke GRANT_ID")
@click.argument("client_id", required=False)
@click.option("--revoke", "revoke_id", default=None, metavar="GRANT", help="Revoke this consent.")
@_DB
def client_grants(client_id: str | None, revoke_id: str | None, db: str | None) -> None:
    """List consents (grant id, client, principal, status, workspaces), or revoke one."""
    from notes_server.cli.database import open_database
    from notes_server.security.tokens import utc_now
    from notes_server.store import oauth
    from notes_server.store.engine import read_tx, write_tx

    with open_database(db) as engine:
        if revoke_id is not None:
            with write_tx(engine) as conn:
                done = oauth.revoke_grant(conn, revoke_id, utc_now())
            if not done:
                raise click.UsageError(f"no active consent {revoke_id}")
            click.echo(f"revoked consent {revoke_id} and its tokens", err=True)
            return
        with read_tx(engine) as conn:
            found = oauth.list_grants(conn, client_id)
    for grant in found:
        status = "revoked" if grant.revoked_at is not None else "active"
        click.echo(
            f"{grant.id}\t{grant.client_id}\t{grant.principal}\t{status}\t"
            f"{_fmt(grant.created_at)}\t{' '.join(grant.workspaces)}"
        )
