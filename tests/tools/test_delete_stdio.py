"""The confirmation flow over a real `notes-server serve` stdio subprocess: each round is one
JSON line in and one JSON line out, and the database effects are read from the same file.
(Both tools share one implementation; the in-process suite covers notes_archive branch by
branch, so only the main round trip runs for both here, to keep process start-ups few.)"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import pytest

from notes_server.store.notes import NoteRecord
from tests.helpers import ServerProcess
from tests.tools.confirm_support import (
    CANCEL,
    DECLINE,
    DELETE,
    FORM,
    KINDS,
    MISSING_CAPABILITY,
    RESULT_META,
    STATE_ERROR,
    WS,
    Flow,
    Kind,
    accept,
    expected_form,
    note_uri,
)

TITLE = "TPS report"
per_kind = pytest.mark.parametrize("kind", KINDS, ids=str)
Spawn = Callable[..., ServerProcess]


class Client:
    """Sends tools/call rounds to one server process, a new request id every time."""

    def __init__(self, process: ServerProcess) -> None:
        self.process = process
        self.ids = itertools.count(1)

    def call(
        self,
        kind: Kind,
        *,
        answer: dict[str, Any] | None = None,
        state: str | None = None,
        caps: dict[str, Any] = FORM,
    ) -> tuple[int, dict[str, Any]]:
        params: dict[str, Any] = {
            "name": kind.tool,
            "arguments": {"workspaceUri": WS, "title": TITLE},
        }
        if state is not None:
            params["inputResponses"] = {kind.key: answer}
            params["requestState"] = state
        request_id = next(self.ids)
        reply = self.process.request("tools/call", params, caps=caps, id=request_id)
        assert reply["jsonrpc"] == "2.0" and reply["id"] == request_id
        return request_id, reply

    def ask(self, kind: Kind) -> str:
        _, reply = self.call(kind)
        assert reply["result"]["resultType"] == "input_required", reply
        state: str = reply["result"]["requestState"]
        return state

    def result(self, kind: Kind, answer: dict[str, Any], state: str) -> dict[str, Any]:
        _, reply = self.call(kind, answer=answer, state=state)
        assert "error" not in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    def error(
        self, kind: Kind, answer: dict[str, Any], state: str, caps: dict[str, Any] = FORM
    ) -> dict[str, Any]:
        _, reply = self.call(kind, answer=answer, state=state, caps=caps)
        assert set(reply) == {"jsonrpc", "id", "error"}, reply
        error: dict[str, Any] = reply["error"]
        return error


@pytest.fixture
def store_impl() -> str:
    """Once, not per implementation: the servers here are separate processes on the default
    one (the in-process flow tests run both)."""
    return os.environ.get("NOTES_SERVER_STORE_IMPL") or "auto"


@pytest.fixture
def serve(flow: Flow, spawn_server: Spawn) -> Callable[[str], Client]:
    """serve(principal): a stdio server on the flow's database file, sharing its state keys."""

    def _serve(principal: str) -> Client:
        keys = flow.settings.state_keys
        assert keys is not None
        process = spawn_server(
            db_url=flow.settings.db_url,
            principal=principal,
            env={"NOTES_SERVER_STATE_KEYS": keys},
        )
        return Client(process)

    return _serve


def done(kind: Kind, note: NoteRecord) -> dict[str, Any]:
    content = {
        kind.flag: True,
        "outcome": kind.done,
        "noteId": note.id,
        "title": note.title,
        "uri": note_uri(note),
    }
    return content


def counts(flow: Flow) -> tuple[int, int, int]:
    return flow.count("notes"), flow.count("consumed_nonces"), flow.count("audit_log")


@per_kind
def test_stdio_accept_then_exact_replay_then_a_different_answer(
    flow: Flow, serve: Callable[[str], Client], kind: Kind
) -> None:
    first = flow.seed(TITLE, "a.md")
    flow.clock.advance(1)
    second = flow.seed(TITLE, "b.md")
    client = serve("alice")

    _, asked = client.call(kind)
    result = asked["result"]
    state = result["requestState"]
    assert result == {
        "resultType": "input_required",
        "inputRequests": {
            kind.key: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": f"2 notes match 'TPS report' in {WS}. "
                    f"Choose the note to {kind.verb} and confirm.",
                    "requestedSchema": expected_form(kind, [second, first]),
                },
            }
        },
        "requestState": state,
        "_meta": RESULT_META,
    }

    accepted = client.result(kind, accept(first.id), state)
    assert accepted["structuredContent"] == done(kind, first)
    assert (accepted["isError"], accepted["_meta"]) == (False, RESULT_META)
    assert flow.applied(kind, first.id)

    repeated = client.result(kind, accept(first.id), state)
    assert repeated == accepted

    assert client.error(kind, accept(second.id), state) == STATE_ERROR
    assert flow.live(second.id) == second
    assert counts(flow) == ((1 if kind is DELETE else 2), 1, 1)


def test_stdio_decline_consumes_the_state(flow: Flow, serve: Callable[[str], Client]) -> None:
    kind = DELETE
    note = flow.seed(TITLE, "tps.md")
    client = serve("alice")
    state = client.ask(kind)

    declined = client.result(kind, DECLINE, state)

    assert declined["structuredContent"] == {kind.flag: False, "outcome": "declined"}
    assert client.error(kind, accept(note.id), state) == STATE_ERROR
    assert flow.live(note.id) == note
    assert counts(flow) == (1, 1, 1)
    [row] = flow.rows("audit_log")
    assert (row["tool"], row["outcome"], row["note_id"]) == (kind.tool, "declined", None)


def test_stdio_cancel_then_accept_with_the_same_state(
    flow: Flow, serve: Callable[[str], Client]
) -> None:
    kind = DELETE
    note = flow.seed(TITLE, "tps.md")
    client = serve("alice")
    state = client.ask(kind)

    cancelled = client.result(kind, CANCEL, state)
    assert cancelled["structuredContent"] == {kind.flag: False, "outcome": "cancelled"}
    assert counts(flow) == (1, 0, 0)

    accepted = client.result(kind, accept(note.id), state)
    assert accepted["structuredContent"] == done(kind, note)
    assert flow.applied(kind, note.id)
    assert flow.count("audit_log") == 1


def test_stdio_without_form_elicitation_every_round_is_refused(
    flow: Flow, serve: Callable[[str], Client]
) -> None:
    kind = DELETE
    note = flow.seed(TITLE, "tps.md")
    client = serve("alice")

    _, first = client.call(kind, caps={})
    assert first["error"] == MISSING_CAPABILITY
    state = client.ask(kind)
    url_only = {"elicitation": {"url": {}}}
    assert client.error(kind, accept(note.id), state, caps=url_only) == MISSING_CAPABILITY
    assert client.error(kind, accept(note.id), state, caps={}) == MISSING_CAPABILITY

    assert flow.live(note.id) == note
    assert counts(flow) == (1, 0, 0)


def test_stdio_another_principals_server_refuses_the_state(
    flow: Flow, serve: Callable[[str], Client]
) -> None:
    kind = DELETE
    flow.grant("bob", WS)
    note = flow.seed(TITLE, "tps.md")
    alice = serve("alice")
    bob = serve("bob")
    state = alice.ask(kind)

    for answer in (accept(note.id), DECLINE, CANCEL):
        assert bob.error(kind, answer, state) == STATE_ERROR

    assert flow.live(note.id) == note
    assert counts(flow) == (1, 0, 0)
    assert alice.result(kind, accept(note.id), state)["structuredContent"] == done(kind, note)
