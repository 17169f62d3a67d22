"""The pure steps of turning an `input_required` answer into server-initiated requests.

Shared by both legacy transports: stdio asks on the connection (`session.LegacyHandler`), HTTP
on the SSE stream of the POST (`legacy.http_stream`). Each decides how to wait for
the client; what to ask, how to retry and when to stop is decided here, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from notes_server.legacy.translate import (
    CONFIRMATION_EXPIRED,
    SERVER_REQUESTS,
    TOO_MANY_ROUNDS,
    expired_confirmation,
    server_request,
    tool_error_result,
)

MAX_ROUNDS = 5

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
