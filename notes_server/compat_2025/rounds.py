"""The pure steps of turning an `input_required` answer into server-initiated requests.

Shared by both legacy transports: stdio asks on the connection (`session.LegacyHandler`), HTTP
on the SSE stream of the POST (`compat_2025.http_stream`). Each decides how to wait for
the client; what to ask, how to retry and when to stop is decided here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from notes_server.compat_2025.translate import (
    CONFIRMATION_EXPIRED,
    SERVER_REQUESTS,
    TOO_MANY_ROUNDS,
    expired_confirmation,
    server_request,
    tool_error_result,
)

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
