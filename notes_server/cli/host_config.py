"""`notes-server host-config`: what registers this server in an MCP host.

`--transport stdio` (the default): the JSON entry that starts this server. Hosts start stdio
servers with a trimmed environment (the Python SDK passes only HOME, LOGNAME,
PATH, SHELL, TERM and USER), so a server that found its database through `XDG_DATA_HOME` or
`NOTES_SERVER_DB` in the user's shell would quietly open a different, empty one under the host.
The snippet therefore spells everything out: the absolute path of this very executable, the
resolved absolute database URL and the principal. No database is opened here.

`--transport http`: the entry that reaches a running `serve --transport http` at `--url`,
with its `Authorization` header taken from where each host keeps secrets: Claude Code's
command line reads `$NOTES_SERVER_TOKEN` in the shell that runs it, VS Code asks for the token
once (an `inputs` promptString, stored by VS Code), and Cursor reads `${env:NOTES_SERVER_TOKEN}`.
A token is printed only when it is passed explicitly with `--token`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any
from urllib.parse import urlsplit

import click

from notes_server.config import Settings, build_settings

SERVER_NAME = "notes"
DEFAULT_URL = "http://127.0.0.1:8765/mcp"
TOKEN_VARIABLE = "NOTES_SERVER_TOKEN"  # read by the host (or its shell), never by the server
TOKEN_INPUT = "notes-server-token"
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


def endpoint(url: str) -> str:
    """The MCP endpoint of `--url`: an http(s) URL without credentials, `/mcp` added to a
    bare origin."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter("must be an http:// or https:// URL", param_hint="--url")
    if parts.username is not None or parts.password is not None:
        raise click.BadParameter(
            "must not carry credentials (the token goes in a header)", param_hint="--url"
        )
    if any(c in url for c in "\"'` \\") or parts.query or parts.fragment:
        raise click.BadParameter(
            "must be a plain URL (no quotes, spaces or query)", param_hint="--url"
        )
    return url.rstrip("/") + "/mcp" if parts.path in ("", "/") else url


def http_entry(client: str, url: str, token: str | None) -> str:
    """What to give the host for an HTTP server: Claude Code's command line, or the JSON of
    VS Code or Cursor; the header names the token's variable or input unless `token`."""
    if client == "claude":
        value = f"Bearer {token}" if token else f"Bearer ${TOKEN_VARIABLE}"
        header = shlex.quote(f"Authorization: {value}") if token else f'"Authorization: {value}"'
        return f"claude mcp add --transport http {SERVER_NAME} {shlex.quote(url)} --header {header}"
    if client == "vscode":
        secret = token or f"${{input:{TOKEN_INPUT}}}"
        entry = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {secret}"}}
        config: dict[str, Any] = {"servers": {SERVER_NAME: entry}}
        if not token:
            prompt = {
                "type": "promptString",
                "id": TOKEN_INPUT,
                "description": "notes-server API token (nst_...)",
                "password": True,
            }
            config = {"inputs": [prompt], **config}
        return json.dumps(config, indent=2)
    value = f"Bearer {token}" if token else f"Bearer ${{env:{TOKEN_VARIABLE}}}"
    cursor = {"mcpServers": {SERVER_NAME: {"url": url, "headers": {"Authorization": value}}}}
    return json.dumps(cursor, indent=2)


HTTP_HINTS = {
    "claude": "Run in a shell where ${var} holds your token (Claude Code keeps the header it "
    "is given); Claude Desktop's config file does not take HTTP servers with headers",
    "vscode": "Paste into .vscode/mcp.json; VS Code asks for the token once and keeps it",
    "cursor": "Paste into ~/.cursor/mcp.json; start Cursor with ${var} set to your token",
}


@click.command(
    name="host-config",
    epilog="Example: notes-server host-config --transport http --client vscode "
    "--url https://notes.example",
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
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the host starts this server; http: the host connects to a running "
    "`serve --transport http` at --url with a bearer token.",
)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help=f"With --transport http: the server's MCP endpoint (default {DEFAULT_URL}; a bare "
    "origin gets /mcp).",
)
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help=f"With --transport http: write this token into the entry (it is then a secret). "
    f"Without it the entry reads ${TOKEN_VARIABLE} or asks for the token.",
)
def host_config(
    principal: str | None,
    client: str,
    db: str | None,
    transport: str,
    url: str | None,
    token: str | None,
) -> None:
    """Print what registers this server in an MCP host: for stdio the JSON entry with
    absolute paths, for http the entry (or Claude Code command) that reaches --url."""
    if transport == "http":
        _http(client, url, token, db, principal)
        return
    if url is not None or token is not None:
        raise click.UsageError("--url and --token need --transport http")
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


def _http(
    client: str, url: str | None, token: str | None, db: str | None, principal: str | None
) -> None:
    if db is not None:
        raise click.UsageError("--db is for --transport stdio: an HTTP server has its own")
    if token is not None and (not token.strip() or any(c.isspace() for c in token)):
        raise click.BadParameter("must be the token itself, without spaces", param_hint="--token")
    click.echo(http_entry(client, endpoint(url or DEFAULT_URL), token))
    who = principal or "PRINCIPAL"
    hint = HTTP_HINTS[client].replace("${var}", f"${TOKEN_VARIABLE}")
    if token:
        hint = (
            "The entry above contains your token: keep it out of shared files and version control"
        )
    click.echo(f"{hint}; create a token with: notes-server token create {who}", err=True)
