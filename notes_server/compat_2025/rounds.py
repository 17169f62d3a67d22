"""The 2025-11-25 rounds loop: turning `input_required` answers into server-initiated requests.

One loop (`call_rounds`) for both transports. It is a generator that yields the steps it needs
taken (`Dispatch` a retry through the core, `Ask` the client one question, `Notify` it, open
or `Pause` on a page wait) and is resumed with what each step produced; it never waits itself.
stdio drives it with a blocking driver on the connection (`session.LegacyHandler`), HTTP with
an async one on the SSE stream of the POST (`compat_2025.http_stream`). What to ask, how to
retry, how long to wait for a page and when to stop is decided here, once; how to wait for the
client is the driver's. A generator rather than a callback because one loop cannot both call
a blocking `ask` and await an async one; the steps are plain values, so both drivers are a
few lines of `send` and the loop stays testable without a transport.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, NamedTuple

from notes_server.compat_2025.translate import (
    CONFIRMATION_EXPIRED,
    SERVER_REQUESTS,
    TOO_MANY_ROUNDS,
    expired_confirmation,
    input_response,
    server_request,
    tool_error_result,
)
from notes_server.protocol.envelope import Request

MAX_ROUNDS = 5
# Waiting for an out-of-band page (URL mode): retries with backoff, bounded by a deadline.
URL_WAIT_S = 15 * 60.0  # the approval page's lifetime (tools.purge.APPROVAL_TTL)
URL_FIRST_POLL_S = 0.25
URL_MAX_POLL_S = 2.0
PAGE_NOT_COMPLETED = (
    "The page the user was sent to was not completed in time, so nothing was changed. Call "
    "the tool again to start over."
)

Outcome = tuple[dict[str, Any] | None, dict[str, Any] | None]
# (inputRequests key, method, the JSON-RPC request to send the client)
Question = tuple[str, str, dict[str, Any]]


def needs_input(result: dict[str, Any] | None) -> bool:
    return result is not None and result.get("resultType") == "input_required"


def too_many_rounds() -> Outcome:
    return tool_error_result(TOO_MANY_ROUNDS.format(rounds=MAX_ROUNDS)), None


def questions(version: str, required: dict[str, Any], new_id: Callable[[], str]) -> list[Question]:
    """One real request per embedded input request a legacy client can answer."""
    asked: list[Question] = []
    embedded_requests = required.get("inputRequests") or {}
    for key, embedded in embedded_requests.items():
        method = embedded.get("method") if isinstance(embedded, dict) else None
        if method in SERVER_REQUESTS:
            asked.append((key, method, server_request(version, new_id(), embedded)))
    return asked


def retry_params(
    params: dict[str, Any], required: dict[str, Any], responses: dict[str, Any]
) -> dict[str, Any]:
    """The original params plus the answers and the core's own `requestState`."""
    out = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    out["inputResponses"] = responses
    if "requestState" in required:
        out["requestState"] = required["requestState"]
    return out


def after_rounds(rounds: int, result: dict[str, Any] | None, error: Any) -> Outcome:
    """A refused state after the user answered means the answer came too late: a tool error."""
    if rounds and error is not None and expired_confirmation(error):
        return tool_error_result(CONFIRMATION_EXPIRED), None
    return result, error


# -- URL mode (2025-11-25): the person is on a page, not in the client -----------------------
#
# `accept` to a URL elicitation only means the client opened the page. The core then keeps
# answering `input_required` with the SAME URL until its own records show the page was
# completed. The adapter does not ask the client again meanwhile: it retries with the same
# answers, backing off, until the core asks something else or finishes (or the deadline), and
# then tells the client `notifications/elicitation/complete` for each page that was done.


def _url_params(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    params = message.get("params")
    if message.get("method") != "elicitation/create" or not isinstance(params, dict):
        return None
    return params if params.get("mode") == "url" else None


def accepted_pages(asked: Sequence[Question], answers: Mapping[str, Any]) -> dict[str, str]:
    """url -> elicitationId of the URL elicitations the client just accepted."""
    pages: dict[str, str] = {}
    for key, _, message in asked:
        params = _url_params(message)
        answer = answers.get(key)
        accepted = isinstance(answer, dict) and answer.get("action") == "accept"
        if params is not None and accepted and isinstance(params.get("elicitationId"), str):
            pages[str(params.get("url"))] = params["elicitationId"]
    return pages


def _asked_urls(required: Mapping[str, Any]) -> list[str | None]:
    embedded = required.get("inputRequests") or {}
    urls: list[str | None] = []
    for request in embedded.values():
        params = _url_params(request) if isinstance(request, dict) else None
        urls.append(None if params is None else str(params.get("url")))
    return urls


def still_on_page(required: Mapping[str, Any], pages: Mapping[str, str]) -> bool:
    """The core asks only for pages the client already opened: wait, do not ask again."""
    urls = _asked_urls(required)
    return bool(pages) and bool(urls) and all(url in pages for url in urls)


def completed_pages(
    pages: Mapping[str, str], result: dict[str, Any] | None, error: Any
) -> list[str]:
    """The elicitationIds of accepted pages the core no longer asks for: they were done (a
    JSON-RPC error, e.g. an expired approval, proves nothing, so it announces none)."""
    if error is not None or result is None:
        return []
    asked = set(_asked_urls(result)) if needs_input(result) else set()
    return [elicitation for url, elicitation in pages.items() if url not in asked]


def elicitation_complete(elicitation_id: str) -> dict[str, Any]:
    params = {"elicitationId": elicitation_id}
    return {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": params}


def page_not_completed() -> Outcome:
    return tool_error_result(PAGE_NOT_COMPLETED), None


# -- the loop -------------------------------------------------------------------------------


class Dispatch(NamedTuple):
    """Run this retry through the core; resume with its Outcome."""

    request: Request


class Ask(NamedTuple):
    """Send the client this request and wait for its response; resume with the response
    object, or None when none came (the wait ran out, or stdin ended)."""

    message: dict[str, Any]


class Notify(NamedTuple):
    """Send the client this notification; resume with None."""

    message: dict[str, Any]


class OpenPage(NamedTuple):
    """The client just opened a page (URL mode): the wait for it starts; resume with None."""


class Pause(NamedTuple):
    """The person is on the page: wait up to `seconds` while still listening to the client
    (a cancellation ends the call); resume with None."""

    seconds: float


Step = Dispatch | Ask | Notify | OpenPage | Pause
Rounds = Generator[Step, Any, Outcome]


def call_rounds(
    request: Request,
    first: Outcome,
    *,
    version: str,
    new_id: Callable[[], str],
    page_wait_s: float = URL_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
) -> Rounds:
    """The rounds of one `tools/call` whose first dispatch answered `first`: at most
    MAX_ROUNDS rounds of questions, each answered by the client in turn, then a retry with the
    answers and the core's own `requestState`. `request` carries the `_meta` the session
    stamped for the first round: every retry keeps it (stamped and read once per call). While
    the person is on a page the client accepted, the same answers are retried with backoff up
    to `page_wait_s`. Returns the call's outcome in the core's shape (the caller translates)."""
    result, error = first
    rounds = 0
    answers: dict[str, Any] = {}
    pages: dict[str, str] = {}  # URL elicitations the client accepted: url -> id
    deadline = delay = 0.0
    while result is not None and needs_input(result):
        if still_on_page(result, pages):
            remaining = deadline - clock()
            if remaining <= 0:
                return page_not_completed()
            yield Pause(min(delay, remaining))
            delay = min(delay * 2, URL_MAX_POLL_S)
        else:
            for elicitation_id in completed_pages(pages, result, None):
                yield Notify(elicitation_complete(elicitation_id))
            if rounds == MAX_ROUNDS:
                return too_many_rounds()
            rounds += 1
            asked = questions(version, result, new_id)
            answers = {}
            for key, method, message in asked:
                answer = input_response(method, (yield Ask(message)))
                if answer is not None:
                    answers[key] = answer
            pages = accepted_pages(asked, answers)
            if pages:
                deadline, delay = clock() + page_wait_s, URL_FIRST_POLL_S
                yield OpenPage()
        params = retry_params(request.params, result, answers)
        request = Request(request.id, request.method, params)
        result, error = yield Dispatch(request)
    for elicitation_id in completed_pages(pages, result, error):
        yield Notify(elicitation_complete(elicitation_id))
    return after_rounds(rounds, result, error)


def drive(rounds: Rounds, take: Callable[[Step], Any]) -> Outcome:
    """Run the loop to its outcome, taking each step with the blocking `take` (stdio). An
    exception from `take` (a cancellation) ends the loop and propagates."""
    reply: Any = None
    while True:
        try:
            step = rounds.send(reply)
        except StopIteration as done:
            outcome: Outcome = done.value
            return outcome
        reply = take(step)


async def drive_async(rounds: Rounds, take: Callable[[Step], Awaitable[Any]]) -> Outcome:
    """`drive` with an awaitable `take` (HTTP: the steps wait on the SSE stream)."""
    reply: Any = None
    while True:
        try:
            step = rounds.send(reply)
        except StopIteration as done:
            outcome: Outcome = done.value
            return outcome
        reply = await take(step)
