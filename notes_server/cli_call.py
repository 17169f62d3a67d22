"""`notes-server call`: try a tool from the terminal, including confirmation forms."""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

import click

from notes_server.client.forms import AnswerError, fill_form
from notes_server.client.session import StdioSession

MAX_ROUNDS = 5
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=option)
        result[key] = value
    return result


def _arguments(args: tuple[str, ...], raw_json: str | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if raw_json:
        try:
            loaded = json.loads(raw_json)
        except ValueError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--json") from None
        if not isinstance(loaded, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--json")
        arguments.update(loaded)
    for key, value in _pairs(args, "--arg").items():
        try:
            arguments[key] = (
                json.loads(value)
                if value[:1] in "[{"
                or value in ("true", "false", "null")
                or value.lstrip("-").isdigit()
                else value
            )
        except ValueError:
            arguments[key] = value
    return arguments


def _answer(
    request: dict[str, Any], scripted: dict[str, str], action: str | None
) -> dict[str, Any]:
    if request.get("method") != "elicitation/create":
        raise click.ClickException(f"cannot answer input request {request.get('method')!r}")
    params = request.get("params", {})
    click.echo(params.get("message", ""), err=True)
    # A person at a terminal just fills the form (note, then yes/no): answering "no" is how
    # they decline, and Ctrl-C cancels. Only scripts name an action.
    interactive = sys.stdin.isatty() and not scripted and action is None
    chosen = action or "accept"
    if chosen != "accept":
        return {"action": chosen}
    prompt = (lambda text: str(click.prompt(text, err=True))) if interactive else None
    try:
        content = fill_form(
            params.get("requestedSchema", {}),
            scripted,
            prompt,
            lambda line: click.echo(line, err=True),
        )
    except AnswerError as exc:
        raise click.ClickException(str(exc)) from None
    return {"action": "accept", "content": content}


@click.command(
    epilog="Example: notes-server call notes_delete --arg workspaceUri=file:///home/alice/notes "
    "--arg 'title=TPS report' --answer note_id=1 --answer confirm=y"
)
@click.argument("tool")
@click.option("--arg", "args", multiple=True, metavar="KEY=VALUE", help="A tool argument.")
@click.option("--json", "raw_json", metavar="OBJECT", help="Tool arguments as a JSON object.")
@click.option(
    "--answer",
    "answers",
    multiple=True,
    metavar="KEY=VALUE",
    help="Scripted form answer (an enum takes its value or its 1-based number).",
)
@click.option(
    "--action",
    type=click.Choice(["accept", "decline", "cancel"]),
    default=None,
    help="Scripted form action (default: accept when answers are given).",
)
@click.option("--db", default=None, metavar="URL", help="Database URL for the spawned server.")
@click.option("--principal", default=None, help="Principal for the spawned server.")
def call(
    tool: str,
    args: tuple[str, ...],
    raw_json: str | None,
    answers: tuple[str, ...],
    action: str | None,
    db: str | None,
    principal: str | None,
) -> None:
    """Call TOOL on a notes-server started over stdio and print the final result."""
    arguments = _arguments(args, raw_json)
    scripted = _pairs(answers, "--answer")
    serve_args = [*(["--db", db] if db else []), *(["--principal", principal] if principal else [])]
    with (
        tempfile.TemporaryFile() as server_log,
        StdioSession(serve_args, stderr=server_log) as session,
    ):
        try:
            _rounds(session, tool, arguments, scripted, action)
        except (click.ClickException, ConnectionError):
            server_log.seek(0)
            sys.stderr.write(server_log.read().decode("utf-8", "replace"))
            raise


def _rounds(
    session: StdioSession,
    tool: str,
    arguments: dict[str, Any],
    scripted: dict[str, str],
    action: str | None,
) -> None:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    for _ in range(MAX_ROUNDS):
        reply = session.request("tools/call", params, CAPABILITIES)
        if "error" in reply:
            error = reply["error"]
            raise click.ClickException(f"error {error.get('code')}: {error.get('message')}")
        result = reply["result"]
        if result.get("resultType") != "input_required":
            _print_result(result)
            return
        responses = {
            key: _answer(req, scripted, action)
            for key, req in result.get("inputRequests", {}).items()
        }
        params = {
            "name": tool,
            "arguments": arguments,
            "inputResponses": responses,
            "requestState": result.get("requestState"),
        }
    raise click.ClickException(f"gave up after {MAX_ROUNDS} rounds of questions")


def _print_result(result: dict[str, Any]) -> None:
    if "structuredContent" in result:
        click.echo(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False))
    else:
        for block in result.get("content", []):
            if block.get("type") == "text":
                click.echo(block["text"])
    if result.get("isError"):
        raise SystemExit(1)
