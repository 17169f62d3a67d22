"""A second multi round-trip tool (tests/tools/multiround_tool.py, loaded like --tools-module)
gets the same state guarantees as the confirmed actions through the shared boundary alone."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from tests.tools.confirm_support import (
    DELETE,
    STATE_ERROR,
    STATE_TTL,
    WS,
    Flow,
    accept,
    error_of,
    structured,
)

SWEEP = "test_sweep"
ARGS: dict[str, Any] = {"workspaceUri": WS, "ids": ["n2", "n1"]}
ACCEPT = {"sweep_ok": {"action": "accept", "content": {}}}
DECLINE = {"sweep_ok": {"action": "decline"}}


@pytest.fixture
def sweep(flow: Flow) -> Flow:
    """The confirm harness's server with the test-only multi-round tool loaded as well."""
    settings = replace(flow.settings, tools_modules=("tests.tools.multiround_tool",))
    return Flow(settings, flow.engine, flow.clock)


def round_one(server: Flow, args: dict[str, Any] = ARGS, *, principal: str = "alice") -> str:
    reply = server.call_tool(SWEEP, args, principal=principal)
    result = reply["result"]
    assert result["resultType"] == "input_required", reply
    assert set(result["inputRequests"]) == {"sweep_ok"}
    state: str = result["requestState"]
    return state


def test_a_second_tool_carries_its_bound_payload_from_round_one_to_round_two(sweep: Flow) -> None:
    state = round_one(sweep)

    done = structured(sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=state))

    assert done["ids"] == ["n1", "n2"]
    assert done["approval"].startswith("pa-") and done["phase"] == "sweep/approve"
    assert len(done["nonce"]) == 32


def test_asking_again_moves_the_same_payload_into_the_next_phase(sweep: Flow) -> None:
    first = round_one(sweep)
    again = sweep.call_tool(SWEEP, ARGS, responses=DECLINE, state=first)["result"]
    assert again["resultType"] == "input_required"

    done = structured(sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=again["requestState"]))
    before = structured(sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=first))

    assert done["phase"] == "sweep/wait" and before["phase"] == "sweep/approve"
    assert (done["ids"], done["approval"]) == (before["ids"], before["approval"])
    assert done["nonce"] != before["nonce"]


@pytest.mark.parametrize(
    "change",
    [
        {"ids": ["n1"]},
        {"ids": ["n1", "n2"]},  # same set, other order: the arguments are bound as sent
        {"workspaceUri": "file:///home/alice/work"},
    ],
)
def test_round_two_with_other_arguments_is_refused(sweep: Flow, change: dict[str, Any]) -> None:
    state = round_one(sweep)

    reply = sweep.call_tool(SWEEP, {**ARGS, **change}, responses=ACCEPT, state=state)

    assert error_of(reply) == STATE_ERROR


def test_round_two_by_another_principal_or_after_expiry_is_refused(sweep: Flow) -> None:
    state = round_one(sweep)

    as_bob = sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=state, principal="bob")
    sweep.clock.advance(STATE_TTL)
    expired = sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=state)

    assert error_of(as_bob) == STATE_ERROR
    assert error_of(expired) == STATE_ERROR


def test_a_state_of_one_multi_round_tool_never_verifies_for_another(sweep: Flow) -> None:
    note = sweep.seed("TPS report", "tps.md")
    delete_state, _ = sweep.ask(DELETE, "TPS report")
    sweep_state = round_one(sweep)

    into_sweep = sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=delete_state)
    into_delete = sweep.answer(DELETE, "TPS report", sweep_state, accept(note.id))

    assert error_of(into_sweep) == STATE_ERROR
    assert error_of(into_delete) == STATE_ERROR
    assert sweep.untouched(1)


def test_the_refusal_reason_goes_to_the_log_and_only_the_fixed_message_to_the_wire(
    sweep: Flow, caplog: pytest.LogCaptureFixture
) -> None:
    sweep.seed("TPS report", "a.md")
    delete_state, _ = sweep.ask(DELETE, "TPS report")

    with caplog.at_level(logging.INFO, logger="notes_server"):
        reply = sweep.call_tool(SWEEP, ARGS, responses=ACCEPT, state=delete_state)

    assert reply["error"] == STATE_ERROR
    assert "issued for another tool" in caplog.text
    assert "issued for another tool" not in str(reply)
