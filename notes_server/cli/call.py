"""`notes-server call`: try a tool from the terminal, including confirmation forms and
approvals on the server's own page (URL mode).

A URL elicitation is shown on stderr (the message and the URL; the spawned server's one-time
approval code is relayed from its stderr); then the call waits for the page to be completed by
retrying with `accept` every PAGE_POLL_S (the server answers the same URL until its records
show the page was done), bounded by PAGE_WAIT_S, the approval's lifetime. Ctrl-C during the
wait answers `cancel`, so the pending approval is dropped and nothing is changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import deque
from typing import IO, Any

import click

from notes_server.cli.client.arguments import ArgumentTypeError, convert_arguments
from notes_server.cli.client.forms import AnswerError, fill_form
from notes_server.cli.client.session import StdioSession

MAX_ROUNDS = 5
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
PAGE_POLL_S = 1.0
PAGE_WAIT_S = 15 * 60.0  # the approval's lifetime (tools.purge.APPROVAL_TTL)
RELAYED = b"notes-server: approval code"


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=option)
        result[key] = value
    return result


def _raw_json(raw_json: str | None) -> dict[str, Any]:
    if not raw_json:
        return {}
    try:
        loaded = json.loads(raw_json)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--json") from None
    if not isinstance(loaded, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--json")
    return loaded


def _arguments(
    session: StdioSession, tool: str, pairs: dict[str, str], raw: dict[str, Any]
) -> dict[str, Any]:
    """`--json`, then every `--arg` converted by the tool's inputSchema (read with
    `tools/list` from the same server), so `title=2024` stays the string "2024"."""
    if not pairs:
        return raw
    try:
        converted = convert_arguments(pairs, _input_schema(session, tool))
    except ArgumentTypeError as exc:
        raise click.BadParameter(str(exc), param_hint="--arg") from None
    return {**raw, **converted}


def _input_schema(session: StdioSession, tool: str) -> dict[str, Any]:
    """The tool's inputSchema; empty when the server does not list it (the call then gets
    the server's own answer for an unknown tool)."""
    params: dict[str, Any] = {}
    while True:
        reply = session.request("tools/list", params, CAPABILITIES)
        result = reply.get("result")
        if not isinstance(result, dict):
            return {}
        for entry in result.get("tools", []):
            if isinstance(entry, dict) and entry.get("name") == tool:
                schema = entry.get("inputSchema")
                return schema if isinstance(schema, dict) else {}
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str):
            return {}
        params = {"cursor": cursor}


def _ask(text: str) -> str:
    """One line from the terminal. Not click.prompt: it turns Ctrl-C into `Aborted!` and exit
    status 1, and the open form must be answered with `cancel` instead (see _rounds)."""
    click.echo(f"{text}: ", nl=False, err=True)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\r\n")


def _answer(
    request: dict[str, Any], scripted: dict[str, str], action: str | None
) -> dict[str, Any]:
    if request.get("method") != "elicitation/create":
        raise click.ClickException(f"cannot answer input request {request.get('method')!r}")
    params = request.get("params", {})
    click.echo(params.get("message", ""), err=True)
    if params.get("mode") == "url":
        if action not in (None, "accept"):
            return {"action": action}
        click.echo(f"Open this page in your browser to approve:\n  {params.get('url')}", err=True)
        click.echo("Waiting for the page to be completed (Ctrl-C cancels)...", err=True)
        return {"action": "accept"}
    # A person at a terminal just fills the form (note, then yes/no): answering "no" is how
    # they decline, and Ctrl-C cancels. Only scripts name an action.
    interactive = sys.stdin.isatty() and not scripted and action is None
    chosen = action or "accept"
    if chosen != "accept":
        return {"action": chosen}
    prompt = _ask if interactive else None
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
@click.option(
    "--arg",
    "args",
    multiple=True,
    metavar="KEY=VALUE",
    help="A tool argument, converted by the tool's inputSchema: a string property keeps "
    "VALUE as typed (title=2024 is the text 2024); integer, number and boolean properties "
    "need 42, 1.5, true or false; array and object properties need JSON. Repeatable; wins "
    "over --json.",
)
@click.option(
    "--json",
    "raw_json",
    metavar="OBJECT",
    help="Tool arguments as one JSON object, sent as written.",
)
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
    pairs = _pairs(args, "--arg")
    raw = _raw_json(raw_json)
    scripted = _pairs(answers, "--answer")
    serve_args = [*(["--db", db] if db else []), *(["--principal", principal] if principal else [])]
    try:
        with StdioSession(serve_args, stderr=subprocess.PIPE) as session:
            relay = StderrRelay(session.process.stderr)
            try:
                arguments = _arguments(session, tool, pairs, raw)
                _rounds(session, tool, arguments, scripted, action)
            except click.UsageError:
                raise
            except (click.ClickException, ConnectionError):
                sys.stderr.write(relay.text())
                raise
    except KeyboardInterrupt:  # before any form was open (or a second Ctrl-C): nothing to answer
        raise SystemExit(130) from None


class StderrRelay:
    """Reads the server's stderr: its approval-code lines go to the person's terminal at
    once; the last MAX_KEPT lines are kept, shown only when the call fails."""

    MAX_KEPT = 2000

    def __init__(self, stream: IO[bytes] | None) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.lines: deque[bytes] = deque(maxlen=self.MAX_KEPT)
        self.thread = threading.Thread(target=self._pump, name="server-stderr", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        if self.stream is None:
            return
        for line in iter(self.stream.readline, b""):
            with self.lock:
                self.lines.append(line)
            if line.startswith(RELAYED):
                sys.stderr.write(line.decode("utf-8", "replace"))
                sys.stderr.flush()

    def text(self) -> str:
        """What the server wrote so far (it may still be running: wait briefly for more)."""
        self.thread.join(timeout=0.5)
        with self.lock:
            return b"".join(self.lines).decode("utf-8", "replace")


def _url_of(request: Any) -> str | None:
    params = request.get("params") if isinstance(request, dict) else None
    if isinstance(params, dict) and params.get("mode") == "url":
        return str(params.get("url"))
    return None


def _rounds(
    session: StdioSession,
    tool: str,
    arguments: dict[str, Any],
    scripted: dict[str, str],
    action: str | None,
) -> None:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    pending: dict[str, Any] | None = None  # the last input_required, to cancel on Ctrl-C
    waiting = Waiting()
    try:
        while True:
            result = _call(session, params)
            if result.get("resultType") != "input_required":
                _print_result(result)
                return
            pending = result
            params = _next_round(result, tool, arguments, scripted, action, waiting)
    except KeyboardInterrupt:
        if session.in_flight is not None:
            # Interrupted while the server works on a round: its answer is read first, so
            # that a form (or approval) it opens is the one cancelled.
            click.echo("Cancelling...", err=True)
            result = _reply(session.receive(session.in_flight))
            if result.get("resultType") != "input_required":
                _print_result(result, exit_on_error=False)
                raise SystemExit(130) from None
            pending = result
        if pending is not None:
            _cancel(session, params, pending)
        raise SystemExit(130) from None
    except EOFError:  # the terminal closed while a question was open: cancel it too
        if pending is not None:
            _cancel(session, params, pending)
        raise click.ClickException("the terminal closed before the form was answered") from None


class Waiting:
    """The URLs the person was sent to (and we accepted), until when to wait, the answers."""

    def __init__(self) -> None:
        self.rounds = 0
        self.pages: set[str] = set()
        self.deadline = 0.0
        self.responses: dict[str, Any] = {}


def _next_round(
    result: dict[str, Any],
    tool: str,
    arguments: dict[str, Any],
    scripted: dict[str, str],
    action: str | None,
    waiting: Waiting,
) -> dict[str, Any]:
    """The next request's params: the same answers again while the person is still on the
    page (after a pause), else the answers to new questions."""
    requests = result.get("inputRequests", {})
    urls = {_url_of(request) for request in requests.values()}
    if waiting.pages and urls and urls <= waiting.pages:
        if time.monotonic() >= waiting.deadline:
            raise click.ClickException(
                "the approval page was not completed in time; nothing was changed"
            )
        time.sleep(PAGE_POLL_S)
    else:
        waiting.rounds += 1
        if waiting.rounds > MAX_ROUNDS:
            raise click.ClickException(f"gave up after {MAX_ROUNDS} rounds of questions")
        answers = {key: _answer(request, scripted, action) for key, request in requests.items()}
        waiting.responses = answers
        waiting.pages = {
            url
            for key, request in requests.items()
            if (url := _url_of(request)) is not None and answers[key].get("action") == "accept"
        }
        waiting.deadline = time.monotonic() + PAGE_WAIT_S
    return {
        "name": tool,
        "arguments": arguments,
        "inputResponses": waiting.responses,
        "requestState": result.get("requestState"),
    }


def _call(session: StdioSession, params: dict[str, Any]) -> dict[str, Any]:
    return _reply(session.request("tools/call", params, CAPABILITIES))


def _reply(reply: dict[str, Any]) -> dict[str, Any]:
    if "error" in reply:
        error = reply["error"]
        raise click.ClickException(f"error {error.get('code')}: {error.get('message')}")
    result: dict[str, Any] = reply["result"]
    return result


def _cancel(session: StdioSession, params: dict[str, Any], required: dict[str, Any]) -> None:
    """Ctrl-C: answer every pending question with `cancel`, so nothing is changed."""
    click.echo("Cancelled.", err=True)
    cancelled = {key: {"action": "cancel"} for key in required.get("inputRequests", {})}
    answer = {
        **params,
        "inputResponses": cancelled,
        "requestState": required.get("requestState"),
    }
    try:
        result = _call(session, answer)
    except click.ClickException as exc:
        click.echo(f"the server refused the cancellation: {exc.message}", err=True)
        return
    click.echo(json.dumps(result.get("structuredContent", {}), ensure_ascii=False), err=True)


def _print_result(result: dict[str, Any], *, exit_on_error: bool = True) -> None:
    if "structuredContent" in result:
        click.echo(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False))
    else:
        for block in result.get("content", []):
            if block.get("type") == "text":
                click.echo(block["text"])
    if result.get("isError") and exit_on_error:
        raise SystemExit(1)
