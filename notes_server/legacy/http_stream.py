"""Server-initiated elicitation on a 2025-11-25 HTTP session: the SSE stream of one `tools/call`.

When the core answers a legacy `tools/call` with `input_required`, the POST is answered with
`text/event-stream`: each embedded input request goes out as a real `elicitation/create` event,
the client POSTs its JSON-RPC response separately, possibly to another worker, and the final
result ends the stream. The question is recorded in the database before it is sent; whichever
worker receives the answer writes it there (`Questions.answer`), and the worker holding the
stream polls with backoff, woken at once when the answer lands in its own process. On embedded
SQLite a poll is one indexed read on the event loop (`quick_polls`); an answered question's row
is deleted in the same worker-thread call as the retry that uses the answer.

The wait is bounded by the confirmation's lifetime (then the question counts as cancelled, so
nothing changes), the rounds by `rounds.MAX_ROUNDS`, and what is kept per question to one row.
`notifications/cancelled` for the call, the end of the session or a client disconnect end the
stream without a result and before the retry, so nothing is mutated. A disconnect after the user
answered cannot stop a retry already running in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
from starlette.types import Message, Receive, Scope, Send

from notes_server.legacy.roots import ROOTS_WAIT_S, Roots, roots_request
from notes_server.legacy.rounds import (
    MAX_ROUNDS,
    URL_FIRST_POLL_S,
    URL_MAX_POLL_S,
    URL_WAIT_S,
    Outcome,
    Question,
    accepted_pages,
    after_rounds,
    completed_pages,
    elicitation_complete,
    needs_input,
    page_not_completed,
    questions,
    retry_params,
    still_on_page,
    too_many_rounds,
)
from notes_server.legacy.session import LegacyHandler
from notes_server.legacy.translate import input_response, is_response
from notes_server.protocol.dispatch import internal_error
from notes_server.protocol.envelope import Request, RequestId, encode_error, encode_result
from notes_server.store.sessions import Answer
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
    """Where questions wait for answers (`legacy.http.SessionStore` over the database)."""

    def ask(self, key: str, question: str, client_key: str, wait_s: float) -> bool: ...

    def poll(self, key: str, question: str) -> Answer | None: ...

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
    """The ASGI response for one legacy `tools/call` that needs the user's input."""

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
        quick_polls: bool = False,
    ) -> None:
        self.handler = handler
        self.request = request
        self.required = required
        self.store = store
        self.session = session
        self.run = run
        self.wakeups = wakeups
        self.wait_limit = wait_limit
        self.roots_wait = min(wait_limit, roots_wait)
        self.quick_polls = quick_polls
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
        result: dict[str, Any] | None = self.required
        error: dict[str, Any] | None = None
        if result is None:
            if self.handler.roots_needed(request.method):
                await self._learn_roots(send)
            result, error = await self._dispatch(request, send)
        page = PageWait(self, request_key(self.request.id))
        try:
            result, error = await self._rounds(request, result, error, page, send)
        finally:
            with anyio.CancelScope(shield=True):
                await page.close()
                if self.answered:
                    await self.run(self._close_answered)
        await send(_body(self.request.id, self.handler.finish(self.request.method, result, error)))

    async def _rounds(
        self,
        request: Request,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
        page: PageWait,
        send: Send,
    ) -> Outcome:
        rounds = 0
        answers: dict[str, Any] = {}
        pages: dict[str, str] = {}  # URL elicitations the client accepted: url -> id
        while needs_input(result):
            assert result is not None
            if still_on_page(result, pages):
                if not await page.pause():  # the person is on the page (Ended: cancelled)
                    result, error = page_not_completed()
                    break
            else:
                await self._announce(completed_pages(pages, result, None), send)
                if rounds == MAX_ROUNDS:
                    result, error = too_many_rounds()
                    break
                rounds += 1
                asked, answers = await self._ask_all(result, send)
                pages = accepted_pages(asked, answers)
                if pages:
                    await page.start()
            params = retry_params(request.params, result, answers)
            request = Request(request.id, request.method, params)
            result, error = await self._dispatch(request, send)
        else:
            await self._announce(completed_pages(pages, result, error), send)
            result, error = after_rounds(rounds, result, error)
        return result, error

    async def _announce(self, completed: list[str], send: Send) -> None:
        """`notifications/elicitation/complete` on this stream for each page completed."""
        for elicitation_id in completed:
            await send(_event(elicitation_complete(elicitation_id)))

    async def _ask_all(
        self, required: dict[str, Any], send: Send
    ) -> tuple[list[Question], dict[str, Any]]:
        answers: dict[str, Any] = {}
        new_id = lambda: f"s-{secrets.token_hex(8)}"  # noqa: E731
        asked = questions(self.handler.session.version, required, new_id)
        for key, method, message in asked:
            response = await self._ask(message, send)
            answer = input_response(method, response)
            if answer is not None:
                answers[key] = answer
        return asked, answers

    async def _dispatch(self, request: Request, send: Send) -> Outcome:
        """The request in a worker thread; its progress notifications go out as they come."""
        relay = Relay()
        dispatch = functools.partial(self.handler.dispatch, request, relay.emit)

        def call() -> Outcome:
            self._close_answered()  # one hand-off for both
            return dispatch()

        work = asyncio.ensure_future(self.run(call))

        async def event(payload: bytes) -> None:
            await send(sse_chunk(payload))

        try:
            return await relay.forward(work, event)
        finally:
            work.cancel()  # only when this stream is torn down; the thread finishes on its own

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

    async def poll(self, row: str) -> Answer | None:
        """A question's state: on the event loop when that is one local read."""
        if self.quick_polls:
            return self.store.poll(self.session, row)
        answer: Answer | None = await self.run(lambda: self.store.poll(self.session, row))
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
    ends it, polled with backoff up to a deadline. The core is retried after each pause, on
    this worker, so it sees the page's completion whichever worker served the page."""

    def __init__(self, conversation: Conversation, client_key: str) -> None:
        self.conversation = conversation
        self.client_key = client_key
        self.row = f"page-{secrets.token_hex(8)}"
        self.recorded = False
        self.deadline = 0.0
        self.delay = URL_FIRST_POLL_S

    async def start(self) -> None:
        """A page was just opened: the deadline and the backoff start over."""
        talk = self.conversation
        limit = min(talk.wait_limit, URL_WAIT_S)
        self.deadline, self.delay = anyio.current_time() + limit, URL_FIRST_POLL_S
        if not self.recorded:
            asked = await talk.run(
                lambda: talk.store.ask(talk.session, self.row, self.client_key, limit)
            )
            if not asked:
                raise Ended
            self.recorded = True

    async def pause(self) -> bool:
        """Wait one backoff step; False once the deadline has passed. Raises Ended."""
        talk = self.conversation
        remaining = self.deadline - anyio.current_time()
        if remaining <= 0:
            return False
        await anyio.sleep(min(self.delay, remaining))
        self.delay = min(self.delay * 2, URL_MAX_POLL_S)
        state = await talk.poll(self.row)
        if state is None or state.cancelled:
            raise Ended
        return True

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
