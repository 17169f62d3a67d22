"""The one rounds loop on its own, driven by a scripted client and core: the steps both
transports take, in order, and what each retry carries."""

from __future__ import annotations

import itertools
from typing import Any

import anyio

from notes_server.compat_2025.rounds import (
    MAX_ROUNDS,
    Ask,
    Dispatch,
    Notify,
    OpenPage,
    Pause,
    Step,
    call_rounds,
    drive,
    drive_async,
)
from notes_server.compat_2025.translate import TOO_MANY_ROUNDS
from notes_server.protocol.envelope import Request

STAMPED = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "x": 1}
CALL = Request(7, "tools/call", {"name": "notes_delete", "arguments": {}, "_meta": STAMPED})
FORM = {"method": "elicitation/create", "params": {"mode": "form", "message": "Delete?"}}
DONE = {"content": [{"type": "text", "text": "done"}], "isError": False}


def required(state: str, request: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "resultType": "input_required",
        "inputRequests": {"confirm": FORM if request is None else request},
        "requestState": state,
    }


class Script:
    """Answers each Ask from `answers` and each Dispatch from `core`; records every step."""

    def __init__(self, answers: list[Any], core: list[dict[str, Any]]) -> None:
        self.answers, self.core = iter(answers), iter(core)
        self.steps: list[Step] = []

    def take(self, step: Step) -> Any:
        self.steps.append(step)
        if isinstance(step, Ask):
            return next(self.answers)
        if isinstance(step, Dispatch):
            return next(self.core), None
        return None


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"s-{next(counter)}"


def test_a_form_round_asks_once_and_retries_with_the_answer_and_the_stamped_meta() -> None:
    answer = {"jsonrpc": "2.0", "id": "s-1", "result": {"action": "accept", "content": {}}}
    script = Script([answer], [DONE])

    outcome = drive(
        call_rounds(CALL, (required("sealed"), None), version="2025-11-25", new_id=ids()),
        script.take,
    )

    assert outcome == (DONE, None)
    asked, retried = script.steps
    assert isinstance(asked, Ask) and isinstance(retried, Dispatch)
    assert asked.message == {"jsonrpc": "2.0", "id": "s-1", **FORM}
    assert retried.request.params == {
        "name": "notes_delete",
        "arguments": {},
        "_meta": STAMPED,
        "inputResponses": {"confirm": {"action": "accept", "content": {}}},
        "requestState": "sealed",
    }


def test_no_answer_to_a_form_counts_as_cancel() -> None:
    script = Script([None], [DONE])

    drive(call_rounds(CALL, (required("s"), None), version="2025-11-25", new_id=ids()), script.take)

    retried = script.steps[-1]
    assert isinstance(retried, Dispatch)
    assert retried.request.params["inputResponses"] == {"confirm": {"action": "cancel"}}


def test_the_async_driver_takes_the_same_steps_to_the_same_outcome() -> None:
    answer = {"jsonrpc": "2.0", "id": "s-1", "result": {"action": "decline"}}
    blocking, awaited = Script([answer], [DONE]), Script([answer], [DONE])

    async def take(step: Step) -> Any:
        return awaited.take(step)

    first = (required("sealed"), None)
    outcome = drive(call_rounds(CALL, first, version="2025-11-25", new_id=ids()), blocking.take)
    rounds = call_rounds(CALL, first, version="2025-11-25", new_id=ids())
    async_outcome = anyio.run(drive_async, rounds, take)

    assert async_outcome == outcome == (DONE, None)
    assert awaited.steps == blocking.steps


def test_a_core_that_keeps_asking_ends_after_max_rounds_in_a_tool_error() -> None:
    answer = {"jsonrpc": "2.0", "id": "x", "result": {"action": "accept", "content": {}}}
    script = Script([answer] * MAX_ROUNDS, [required(f"s{n}") for n in range(MAX_ROUNDS)])

    result, error = drive(
        call_rounds(CALL, (required("s"), None), version="2025-11-25", new_id=ids()),
        script.take,
    )

    assert error is None
    assert result == {
        "content": [{"type": "text", "text": TOO_MANY_ROUNDS.format(rounds=MAX_ROUNDS)}],
        "isError": True,
    }
    assert [type(s) for s in script.steps] == [Ask, Dispatch] * MAX_ROUNDS


def test_an_accepted_page_is_waited_on_then_announced_complete_before_the_result() -> None:
    page = {"method": "elicitation/create", "params": {"mode": "url", "url": "https://p/a"}}
    accepted = {"jsonrpc": "2.0", "id": "s-1", "result": {"action": "accept"}}
    script = Script([accepted], [required("s1", page), DONE])
    now = [0.0]

    def take(step: Step) -> Any:
        if isinstance(step, Pause):
            now[0] += step.seconds
        return script.take(step)

    outcome = drive(
        call_rounds(
            CALL,
            (required("s0", page), None),
            version="2025-11-25",
            new_id=ids(),
            clock=lambda: now[0],
        ),
        take,
    )

    assert outcome == (DONE, None)
    kinds = [type(s) for s in script.steps]
    assert kinds == [Ask, OpenPage, Dispatch, Pause, Dispatch, Notify]
    pause, complete = script.steps[3], script.steps[5]
    assert isinstance(pause, Pause) and pause.seconds == 0.25
    assert isinstance(complete, Notify)
    assert complete.message == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": "s-1"},
    }
