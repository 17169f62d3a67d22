"""The SSE conversation of one legacy HTTP `tools/call`, driven as an ASGI app with stand-ins
for the core and the question store: the bounds and the failure paths that a real client
cannot easily provoke (an unanswered question, a session ended mid-wait, a fault mid-stream)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from notes_server.compat_2025 import http_stream
from notes_server.compat_2025.http_stream import WITHDRAWN, Conversation, Wakeups
from notes_server.compat_2025.session import LegacySession
from notes_server.protocol.envelope import Request
from notes_server.store.sessions import QuestionState

QUESTION = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Delete?", "requestedSchema": {"type": "object"}},
}
REQUIRED = {
    "resultType": "input_required",
    "inputRequests": {"confirm": QUESTION},
    "requestState": "sealed",
}
DONE = {"content": [{"type": "text", "text": "nothing changed"}], "isError": False}


@dataclass
class Core:
    """Stands in for LegacyHandler: records each retry, answers DONE."""

    session: LegacySession = field(
        default_factory=lambda: LegacySession("2025-11-25", {"elicitation": {}}, None)
    )
    retries: list[dict[str, Any]] = field(default_factory=list)

    def dispatch(
        self, request: Request, emit: Any = None, meta: Any = None
    ) -> tuple[dict[str, Any], None]:
        self.retries.append(request.params)
        return DONE, None

    def finish(self, method: str, result: Any, error: Any) -> tuple[Any, Any]:
        return result, error


@dataclass
class Store:
    """Stands in for the question store; `answer` is what every poll sees."""

    answer: QuestionState | None = field(default_factory=lambda: QuestionState(None, False))
    fail: bool = False
    closed: list[str] = field(default_factory=list)

    cancelled_early: bool = False

    def ask(self, session: str, question: str, client_key: str, wait_s: float) -> bool:
        if self.fail:
            raise RuntimeError("secret detail /var/lib/notes.db")
        return not self.cancelled_early

    def poll(self, session: str, question: str) -> QuestionState | None:
        return self.answer

    def close(self, session: str, question: str) -> None:
        self.closed.append(question)


def converse(
    core: Core,
    store: Store,
    wait_limit: float = 30.0,
    *,
    polls_on_loop: bool = False,
    thread_calls: list[int] | None = None,
    wakeups: Wakeups | None = None,
    on_send: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the conversation to its end; the ASGI messages it sent. `thread_calls` counts the
    calls handed to the worker threads; `on_send` sees each message as it is sent."""
    sent: list[dict[str, Any]] = []

    async def run(func: Any) -> Any:
        if thread_calls is not None:
            thread_calls.append(1)
        return func()

    async def send(message: Any) -> None:
        sent.append(message)
        if on_send is not None:
            on_send(message)

    async def receive() -> Any:
        await anyio.sleep_forever()

    async def main() -> None:
        conversation = Conversation(
            core,  # type: ignore[arg-type]
            Request(7, "tools/call", {"name": "notes_delete", "arguments": {}}),
            REQUIRED,
            store=store,
            session="h",
            run=run,
            wakeups=Wakeups() if wakeups is None else wakeups,
            wait_limit=wait_limit,
            polls_on_loop=polls_on_loop,
        )
        with anyio.fail_after(30):
            await conversation({"type": "http"}, receive, send)

    anyio.run(main)
    return sent


def events(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in sent:
        body = message.get("body", b"")
        if body:
            assert body.startswith(b"event: message\ndata: ") and body.endswith(b"\n\n")
            out.append(json.loads(body[len(b"event: message\ndata: ") : -2]))
    return out


def test_a_question_nobody_answers_in_time_counts_as_cancel_and_the_result_follows() -> None:
    core, store = Core(), Store()

    sent = converse(core, store, wait_limit=0.05)

    question, withdrawn, final = events(sent)
    assert question["method"] == "elicitation/create"
    assert withdrawn == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": question["id"], "reason": WITHDRAWN},
    }
    assert core.retries[0]["inputResponses"] == {"confirm": {"action": "cancel"}}
    assert core.retries[0]["requestState"] == "sealed"
    assert final == {"jsonrpc": "2.0", "id": 7, "result": DONE}
    assert store.closed == [question["id"]]


def test_an_answer_is_passed_to_the_core_as_its_input_response() -> None:
    response = {"jsonrpc": "2.0", "id": "x", "result": {"action": "decline"}}
    core, store = Core(), Store(QuestionState(json.dumps(response), False))

    sent = converse(core, store)

    assert core.retries[0]["inputResponses"] == {"confirm": {"action": "decline"}}
    assert events(sent)[-1]["result"] == DONE


def test_a_session_ended_while_waiting_ends_the_stream_without_a_retry() -> None:
    core, store = Core(), Store(answer=None)

    sent = converse(core, store)

    assert [e.get("method") for e in events(sent)] == ["elicitation/create"]
    assert core.retries == []
    assert sent[0]["headers"][0] == (b"content-type", b"text/event-stream")
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_fault_after_the_stream_started_is_a_json_rpc_error_event_without_details() -> None:
    core, store = Core(), Store(fail=True)

    sent = converse(core, store)

    (error,) = events(sent)
    assert error["id"] == 7
    assert error["error"]["code"] == -32603
    assert "secret" not in json.dumps(error) and "/var/lib" not in json.dumps(error)
    assert core.retries == []


def test_a_call_cancelled_before_its_question_is_asked_ends_without_asking() -> None:
    core, store = Core(), Store(cancelled_early=True)

    sent = converse(core, store)

    assert events(sent) == []
    assert core.retries == []
    assert store.closed == []


def test_an_answered_question_is_forgotten_in_the_same_thread_call_as_the_retry() -> None:
    """With quick polls (embedded SQLite) a round takes two worker-thread calls: record the
    question; then forget it and retry the call with the answer."""
    response = {"jsonrpc": "2.0", "id": "x", "result": {"action": "decline"}}
    store = Store(QuestionState(json.dumps(response), False))
    closed_at_retry: list[list[str]] = []

    class Watching(Core):
        def dispatch(
            self, request: Request, emit: Any = None, meta: Any = None
        ) -> tuple[dict[str, Any], None]:
            closed_at_retry.append(list(store.closed))
            return super().dispatch(request, emit)

    core, thread_calls = Watching(), []

    sent = converse(core, store, polls_on_loop=True, thread_calls=thread_calls)

    question = events(sent)[0]
    assert len(thread_calls) == 2
    assert closed_at_retry == [[question["id"]]]
    assert store.closed == [question["id"]]
    assert events(sent)[-1]["result"] == DONE


def test_an_answer_landing_in_this_process_wakes_the_waiting_stream_at_once(
    monkeypatch: Any,
) -> None:
    """The next poll would come only after an hour: the answer is seen through the wake-up
    the answering POST gives when it lands in the process that holds the stream."""
    monkeypatch.setattr(http_stream, "FIRST_POLL_S", 3600.0)
    core, store, wakeups = Core(), Store(), Wakeups()

    def answer_at_once(message: dict[str, Any]) -> None:
        asked = events([message])
        if asked and asked[0].get("method") == "elicitation/create":
            response = {"jsonrpc": "2.0", "id": asked[0]["id"], "result": {"action": "decline"}}
            store.answer = QuestionState(json.dumps(response), False)
            wakeups.wake("h", asked[0]["id"])

    sent = converse(
        core, store, 7200.0, polls_on_loop=True, wakeups=wakeups, on_send=answer_at_once
    )

    assert core.retries[0]["inputResponses"] == {"confirm": {"action": "decline"}}
    assert events(sent)[-1]["result"] == DONE
