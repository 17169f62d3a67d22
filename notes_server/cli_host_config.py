"""`notes-server host-config`: the JSON that registers this server in an MCP host.

Hosts start stdio servers with a trimmed environment (the Python SDK passes only HOME, LOGNAME,
PATH, SHELL, TERM and USER), so a server that found its database through `XDG_DATA_HOME` or
`NOTES_SERVER_DB` in the user's shell would quietly open a different, empty one under the host.
The snippet therefore spells everything out: the absolute path of this very executable, the
resolved absolute database URL and the principal. No database is opened here.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import click

from notes_server.config import Settings, build_settings

SERVER_NAME = "notes"
# Where each host reads the snippet from (a hint on stderr; stdout carries only the JSON).
CONFIG_FILES = {
    "claude": "claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config)",
    "vscode": ".vscode/mcp.json in your workspace",
    "cursor": "~/.cursor/mcp.json",
}


def server_command() -> list[str]:
    """How to start this installation: its `notes-server` script when that is what is running
    (or sits beside this interpreter), else this interpreter with `-m notes_server`."""
    script = sys.argv[0] if sys.argv else ""
    if os.path.basename(script) == "notes-server" and os.path.isfile(script):
        return [os.path.abspath(script)]
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "notes-server")
    if os.path.isfile(beside):
        return [beside]
    return [os.path.abspath(sys.executable), "-m", "notes_server"]


def absolute_db_url(settings: Settings) -> str:
    """The database URL with a relative SQLite file path made absolute (the host's working
    directory is not this shell's); other URLs are already location-independent."""
    path = settings.sqlite_path
    if path is None or path.is_absolute():
        return settings.db_url
    query = settings.db_url.partition("?")[2]
    return f"sqlite:///{os.path.abspath(path)}" + (f"?{query}" if query else "")


def snippet(client: str, command: list[str], args: list[str]) -> dict[str, Any]:
    """The host's own configuration shape around one stdio server entry."""
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], *args]}
    if client == "vscode":
        return {"servers": {SERVER_NAME: {"type": "stdio", **entry}}}
    return {"mcpServers": {SERVER_NAME: entry}}


@click.command(
    name="host-config",
    epilog="Example: notes-server host-config --principal alice --client vscode",
)
@click.option(
    "--principal",
    default=None,
    help="Who the host acts as (default: $NOTES_SERVER_PRINCIPAL, else your login name).",
)
@click.option(
    "--client",
    type=click.Choice(sorted(CONFIG_FILES)),
    default="claude",
    show_default=True,
    help="Which host's configuration shape to print.",
)
@click.option(
    "--db",
    default=None,
    metavar="URL",
    help="Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file).",
)
def host_config(principal: str | None, client: str, db: str | None) -> None:
    """Print the JSON that registers this server in an MCP host, with absolute paths."""
    if principal is not None and not principal.strip():
        raise click.BadParameter(
            "is empty (was it given as an unset variable such as $USER?); "
            "pass the name to serve as, e.g. --principal alice",
            param_hint="--principal",
        )
    settings = build_settings(db=db, principal=principal)
    if len(settings.principal) > 200:
        raise click.BadParameter("must be at most 200 characters", param_hint="--principal")
    if settings.db_display != settings.db_url:
        raise click.UsageError(
            "the database URL carries credentials, which host-config does not print; "
            "write the snippet for an embedded database and set NOTES_SERVER_DB in the "
            "host's env block yourself"
        )
    url = absolute_db_url(settings)
    command = server_command()
    args = ["serve", "--db", url, "--principal", settings.principal]
    click.echo(json.dumps(snippet(client, command, args), indent=2))
    # The default database is found the same way by a grant from this shell, which also
    # creates it; an explicit one must be migrated first, and is named.
    grant = [*command, "workspace", "grant", settings.principal, "file:///path/to/notes"]
    if not settings.db_is_default:
        grant += ["--db", url]
    click.echo(
        f"Paste into {CONFIG_FILES[client]}; grant a workspace with: {shlex.join(grant)}",
        err=True,
    )
