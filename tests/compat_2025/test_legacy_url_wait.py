"""URL-mode elicitation on a 2025-11-25 HTTP stream, with stand-ins for the core and the
question store: after the host's `accept` the adapter does not ask again while the core keeps
answering the same URL; it retries with the same answer until the core moves on (then
`notifications/elicitation/complete` precedes what follows) or the wait's bound passes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from notes_server.compat_2025.http_stream import Conversation, Wakeups
from notes_server.compat_2025.rounds import PAGE_NOT_COMPLETED
from notes_server.compat_2025.session import LegacySession
from notes_server.protocol.envelope import Request
from notes_server.store.sessions import QuestionState

PAGE = "https://notes.example/approval?a=pa-1&k=secret"


def url_required(url: str, state: str) -> dict[str, Any]:
    params = {"mode": "url", "message": "Approve on the page", "url": url}
    return {
        "resultType": "input_required",
        "inputRequests": {"approval": {"method": "elicitation/create", "params": params}},
        "requestState": state,
    }


DONE = {"content": [{"type": "text", "text": "purged"}], "isError": False}


@dataclass
class Core:
    """Answers the same URL for `pending` retries, then `after` (DONE by default)."""

    pending: int
    after: dict[str, Any] = field(default_factory=lambda: DONE)
    session: LegacySession = field(
        default_factory=lambda: LegacySession("2025-11-25", {"elicitation": {"url": {}}}, None)
    )
    retries: list[dict[str, Any]] = field(default_factory=list)

    def dispatch(
        self, request: Request, emit: Any = None, meta: Any = None
    ) -> tuple[dict[str, Any], None]:
        self.retries.append(request.params)
        if len(self.retries) <= self.pending:
            return url_required(PAGE, f"state-{len(self.retries)}"), None
        return self.after, None

    def finish(self, method: str, result: Any, error: Any) -> tuple[Any, Any]:
        return result, error


@dataclass
class Store:
    """Every question is answered `accept` at once; nothing is cancelled."""

    asked: list[str] = field(default_factory=list)

    def ask(self, session: str, question: str, client_key: str, wait_s: float) -> bool:
        self.asked.append(question)
        return True

    def poll(self, session: str, question: str) -> QuestionState | None:
        response = {"jsonrpc": "2.0", "id": question, "result": {"action": "accept"}}
        return QuestionState(json.dumps(response), False)

    def close(self, session: str, question: str) -> None:
        return None


def converse(core: Core, wait_limit: float) -> list[dict[str, Any]]:
    """Run the conversation to its end; the JSON messages it put on the stream."""
    sent: list[bytes] = []

    async def run(func: Any) -> Any:
        return func()

    async def send(message: Any) -> None:
        if message.get("body"):
            sent.append(message["body"])

    async def receive() -> Any:
        await anyio.sleep_forever()

    async def main() -> None:
        conversation = Conversation(
            core,  # type: ignore[arg-type]
            Request(7, "tools/call", {"name": "notes_purge", "arguments": {}}),
            url_required(PAGE, "state-0"),
            store=Store(),  # type: ignore[arg-type]
            session="h",
            run=run,
            wakeups=Wakeups(),
            wait_limit=wait_limit,
        )
        await conversation({"type": "http"}, receive, send)

    anyio.run(main)
    prefix = b"event: message\ndata: "
    return [json.loads(body[len(prefix) : -2]) for body in sent]


def test_after_accept_the_host_is_asked_once_and_told_complete_before_the_result() -> None:
    core = Core(pending=2)

    question, complete, final = converse(core, wait_limit=30.0)

    assert question["method"] == "elicitation/create"
    assert question["params"]["elicitationId"] == question["id"]
    assert complete == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": question["id"]},
    }
    assert final == {"jsonrpc": "2.0", "id": 7, "result": DONE}
    assert len(core.retries) == 3  # two while on the page, one that finished
    assert [r["requestState"] for r in core.retries] == ["state-0", "state-1", "state-2"]
    assert all(r["inputResponses"] == {"approval": {"action": "accept"}} for r in core.retries)


def test_a_page_never_completed_ends_in_a_tool_error_at_the_bound_without_complete() -> None:
    core = Core(pending=10_000)

    sent = converse(core, wait_limit=0.3)

    question, final = sent
    assert question["method"] == "elicitation/create"
    assert final["result"] == {
        "content": [{"type": "text", "text": PAGE_NOT_COMPLETED}],
        "isError": True,
    }
    assert 1 <= len(core.retries) < 10  # backed off, not spinning


def test_a_new_url_after_the_page_is_asked_as_a_new_question_after_complete() -> None:
    fresh = url_required("https://notes.example/approval?a=pa-2&k=other", "state-new")
    core = Core(pending=1, after=fresh)

    sent = converse(core, wait_limit=0.3)

    kinds = [m.get("method", "result" if "result" in m else None) for m in sent]
    assert kinds[:3] == [
        "elicitation/create",
        "notifications/elicitation/complete",
        "elicitation/create",
    ]
    assert sent[1]["params"]["elicitationId"] == sent[0]["id"]
    assert sent[2]["params"]["url"].endswith("pa-2&k=other")
