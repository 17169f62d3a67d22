"""Server-initiated elicitation on a 2025-11-25 HTTP session: the SSE stream of one `tools/call`.

When the core answers a legacy `tools/call` with `input_required`, the POST is answered with
`text/event-stream`: each embedded input request goes out as a real `elicitation/create` event,
the client POSTs its JSON-RPC response separately, possibly to another worker, and the final
result ends the stream. The question is recorded in the database before it is sent; whichever
worker receives the answer writes it there (`Questions.answer`), and the worker holding the
stream polls with backoff, woken at once when the answer lands in its own process. On embedded
SQLite a poll is one indexed read on the event loop (`polls_on_loop`); an answered question's row
is deleted in the same worker-thread call as the retry that uses the answer.

The wait is bounded by the confirmation's lifetime (then the question counts as cancelled, so
nothing changes), the rounds by `rounds.MAX_ROUNDS`, and what is kept per question to one row.
`notifications/cancelled` for the call, the end of the session or a client disconnect end the
stream without a result and before the retry, so nothing is mutated. A disconnect after the user
answered cannot stop a retry already running in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
from starlette.types import Message, Receive, Scope, Send

from notes_server.compat_2025.roots import ROOTS_WAIT_S, Roots, roots_request
from notes_server.compat_2025.rounds import (
    URL_WAIT_S,
    Ask,
    Dispatch,
    Notify,
    OpenPage,
    Outcome,
    Pause,
    Step,
    call_rounds,
    drive_async,
)
from notes_server.compat_2025.session import LegacyHandler
from notes_server.compat_2025.translate import is_response
from notes_server.protocol.envelope import Request, RequestId, encode_error, encode_result
from notes_server.protocol.meta import ClientMeta
from notes_server.protocol.progress import Emit
from notes_server.protocol.server import internal_error
from notes_server.store.sessions import QuestionState
from notes_server.transports.http.progress import Relay, sse_chunk

log = logging.getLogger("notes_server.legacy")

FIRST_POLL_S = 0.02
MAX_POLL_S = 1.0
MAX_ANSWER_BYTES = 64 * 1024
_T = TypeVar("_T")
Run = Callable[[Callable[[], _T]], Awaitable[_T]]


class Ended(Exception):
    """The wait is over without an answer: cancelled, or the session ended."""


def request_key(request_id: RequestId) -> str:
    """A fixed-size key for a client's request id (`1` and `"1"` differ)."""
    return hashlib.sha256(json.dumps(request_id).encode()).hexdigest()


WITHDRAWN = "The server stopped waiting for an answer to this request"


def _withdrawn(request_id: RequestId) -> dict[str, Any]:
    """`notifications/cancelled` for one of our questions, so that a client still showing it
    (a form in front of the person) can take it away: its answer would now be dropped."""
    params = {"requestId": request_id, "reason": WITHDRAWN}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def _event(message: dict[str, Any]) -> Message:
    """One SSE event on the call's stream, as an ASGI body message."""
    return sse_chunk(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())


class QuestionStore(Protocol):
    """Where questions wait for answers (`compat_2025.http.SessionStore` over the database)."""

    def ask(self, key: str, question: str, client_key: str, wait_s: float) -> bool: ...

    def poll(self, key: str, question: str) -> QuestionState | None: ...

    def close(self, key: str, question: str) -> None: ...

    def keep_roots(self, key: str, roots: Roots | None, generation: int) -> None: ...


class Wakeups:
    """Process-local: the holding stream wakes at once when its answer arrives in this worker."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], anyio.Event] = {}

    def register(self, session: str, request_id: str) -> anyio.Event:
        event = anyio.Event()
        self._events[(session, request_id)] = event
        return event

    def forget(self, session: str, request_id: str) -> None:
        self._events.pop((session, request_id), None)

    def wake(self, session: str, request_id: str) -> None:
        event = self._events.get((session, request_id))
        if event is not None:
            event.set()


class Conversation:
    """The ASGI response for one legacy `tools/call` that needs the user's input. With
    `required` (the first round's answer), `request` is the prepared one (`_meta` stamped) and
    `meta` what was read from it; without, the first round runs here."""

    def __init__(
        self,
        handler: LegacyHandler,
        request: Request,
        required: dict[str, Any] | None,
        *,
        store: QuestionStore,
        session: str,
        run: Run[Any],
        wakeups: Wakeups,
        wait_limit: float,
        roots_wait: float = ROOTS_WAIT_S,
        polls_on_loop: bool = False,
        meta: ClientMeta | None = None,
    ) -> None:
        self.handler = handler
        self.request = request
        self.required = required
        self.meta = meta
        self.store = store
        self.session = session
        self.run = run
        self.wakeups = wakeups
        self.wait_limit = wait_limit
        self.roots_wait = min(wait_limit, roots_wait)
        self.polls_on_loop = polls_on_loop
        self.answered: list[str] = []  # questions whose rows the next thread call deletes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                log.info("legacy client disconnected; its tools/call was abandoned")
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                await self._converse(send)
            except Ended:
                log.info("legacy tools/call %r ended without a result", self.request.id)
            except Exception as exc:  # the stream has started: the error goes on it, as JSON-RPC
                error = internal_error(exc, "a legacy tools/call")
                await send(_body(self.request.id, (None, error)))
            group.cancel_scope.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _converse(self, send: Send) -> None:
        """`required` None: run the request itself here (after asking the client's roots
        when they are needed), so that its progress and questions share this stream."""
        request = self.request
        first: Outcome = (self.required, None)
        if self.required is None:
            if self.handler.roots_needed(request.method):
                await self._learn_roots(send)
            request, first = await self._first_round(send)
        page = PageWait(self, request_key(self.request.id))
        try:
            result, error = await self._rounds(request, first, page, send)
        finally:
            with anyio.CancelScope(shield=True):
                await page.close()
                if self.answered:
                    await self.run(self._close_answered)
        await send(_body(self.request.id, self.handler.finish(self.request.method, result, error)))

    async def _rounds(
        self, request: Request, first: Outcome, page: PageWait, send: Send
    ) -> Outcome:
        """The rounds loop (`rounds.call_rounds`) driven on this stream: questions go out as
        events and wait for the answering POST, retries run in a worker thread."""

        async def take(step: Step) -> Any:
            if isinstance(step, Dispatch):
                return await self._dispatch(step.request, send)
            if isinstance(step, Ask):
                return await self._ask(step.message, send)
            if isinstance(step, Notify):
                await send(_event(step.message))
            elif isinstance(step, Pause):
                await page.pause(step.seconds)
            else:
                assert isinstance(step, OpenPage)
                await page.open()
            return None

        rounds = call_rounds(
            request,
            first,
            version=self.handler.session.version,
            new_id=lambda: f"s-{secrets.token_hex(8)}",
            page_wait_s=min(self.wait_limit, URL_WAIT_S),
            clock=anyio.current_time,
        )
        return await drive_async(rounds, take)

    async def _first_round(self, send: Send) -> tuple[Request, Outcome]:
        """Prepare the request and run its first round in one worker-thread call (preparing
        may read the grants); the prepared request is what the rounds retry."""
        handler, request = self.handler, self.request
        prepared, first = await self._in_thread(lambda emit: handler.start(request, emit), send)
        self.meta = prepared.meta
        return prepared.request, first

    async def _dispatch(self, request: Request, send: Send) -> Outcome:
        """A retry through the core, with the `_meta` read in the first round."""
        handler, meta = self.handler, self.meta
        outcome: Outcome = await self._in_thread(
            lambda emit: handler.dispatch(request, emit, meta), send
        )
        return outcome

    async def _in_thread(self, work: Callable[[Emit], _T], send: Send) -> _T:
        """`work(emit)` in a worker thread, after deleting the rows of the questions answered
        so far (one hand-off for both); its progress notifications go out as they come."""
        relay = Relay()

        def call() -> _T:
            self._close_answered()
            return work(relay.emit)

        future = asyncio.ensure_future(self.run(call))

        async def event(payload: bytes) -> None:
            await send(sse_chunk(payload))

        try:
            return await relay.forward(future, event)
        finally:
            future.cancel()  # only when this stream is torn down; the thread finishes on its own

    async def _learn_roots(self, send: Send) -> None:
        """Ask `roots/list` on this stream; keep the answer for the session's later requests."""
        session = self.handler.session
        question = roots_request(f"s-{secrets.token_hex(8)}")
        response = await self._ask(question, send, self.roots_wait)
        roots = await self.run(lambda: self.handler.learn_roots(response))  # reads the grants
        await self.run(lambda: self.store.keep_roots(self.session, roots, session.roots_generation))

    async def _ask(
        self, message: dict[str, Any], send: Send, wait_s: float | None = None
    ) -> dict[str, Any] | None:
        """Send one question and wait for its answer (None: the wait ran out)."""
        question_id = str(message["id"])
        deadline = anyio.current_time() + (self.wait_limit if wait_s is None else wait_s)
        client_key = request_key(self.request.id)
        asked = await self.run(
            lambda: self.store.ask(self.session, question_id, client_key, self.wait_limit)
        )
        if not asked:
            raise Ended  # cancelled before the question could be sent
        woken = self.wakeups.register(self.session, question_id)
        try:
            await send(_event(message))
            response = await self._wait(question_id, deadline, woken)
            if response is None:  # the client may still show the question: withdraw it
                await send(_event(_withdrawn(message["id"])))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.run(lambda: self.store.close(self.session, question_id))
            raise
        finally:
            self.wakeups.forget(self.session, question_id)
        self.answered.append(question_id)  # deleted with the next thread call, or at the end
        return response

    def _close_answered(self) -> None:
        """Delete the rows of the questions answered so far (in a worker thread)."""
        while self.answered:
            try:
                question_id = self.answered.pop()
            except IndexError:  # an abandoned dispatch's thread took the last one
                return
            self.store.close(self.session, question_id)

    async def poll(self, row: str) -> QuestionState | None:
        """A question's state: on the event loop when that is one local read."""
        if self.polls_on_loop:
            return self.store.poll(self.session, row)
        answer: QuestionState | None = await self.run(lambda: self.store.poll(self.session, row))
        return answer

    async def _wait(
        self, question_id: str, deadline: float, woken: anyio.Event
    ) -> dict[str, Any] | None:
        delay = FIRST_POLL_S
        while True:
            answer = await self.poll(question_id)
            if answer is None or answer.cancelled:
                raise Ended
            if answer.response_json is not None:
                return _response(answer.response_json)
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                log.info("legacy question %s was not answered in time", question_id)
                return None
            with anyio.move_on_after(min(delay, remaining)):
                await woken.wait()
            delay = min(delay * 2, MAX_POLL_S)


class PageWait:
    """The wait while the person is on a page the client opened (URL mode): a row in the
    question store, so that `notifications/cancelled` on any worker or the end of the session
    ends it, polled after each pause (the loop keeps the deadline and the backoff). The core is
    retried after each pause, on this worker, so it sees the page's completion whichever
    worker served the page."""

    def __init__(self, conversation: Conversation, client_key: str) -> None:
        self.conversation = conversation
        self.client_key = client_key
        self.row = f"page-{secrets.token_hex(8)}"
        self.recorded = False

    async def open(self) -> None:
        """A page was just opened: record the wait once. Raises Ended."""
        talk = self.conversation
        if not self.recorded:
            limit = min(talk.wait_limit, URL_WAIT_S)
            asked = await talk.run(
                lambda: talk.store.ask(talk.session, self.row, self.client_key, limit)
            )
            if not asked:
                raise Ended
            self.recorded = True

    async def pause(self, seconds: float) -> None:
        """Wait one backoff step, then see whether the wait was ended. Raises Ended."""
        talk = self.conversation
        await anyio.sleep(seconds)
        state = await talk.poll(self.row)
        if state is None or state.cancelled:
            raise Ended

    async def close(self) -> None:
        if self.recorded:
            talk = self.conversation
            await talk.run(lambda: talk.store.close(talk.session, self.row))


def _response(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if is_response(message) else None


def _body(request_id: RequestId, outcome: Outcome) -> Message:
    result, error = outcome
    if error is not None:
        payload = encode_error(request_id, error)
    else:
        assert result is not None
        payload = encode_result(request_id, result)
    return sse_chunk(payload)
