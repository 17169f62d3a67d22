"""A requestState is only honoured exactly as issued, by the server keys that sealed it, for the
principal, tool, workspace and title it was issued for, and before it expires. Every refusal is
-32602 "Invalid or expired requestState" and leaves the database untouched."""

from __future__ import annotations

import base64
import string
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from notes_server.security.keyring import KeyRing
from tests.tools.confirm_support import (
    ARCHIVE,
    CANCEL,
    DECLINE,
    DELETE,
    KINDS,
    OTHER_WS,
    STATE_ERROR,
    STATE_TTL,
    WS,
    Flow,
    Kind,
    accept,
    error_of,
    structured,
)

TITLE = "TPS report"
B64URL = string.ascii_letters + string.digits + "-_"
per_kind = pytest.mark.parametrize("kind", KINDS, ids=str)
ANSWERS = pytest.mark.parametrize("answer", ["accept", "decline", "cancel"])


def response(answer: str, note_id: str) -> dict[str, Any]:
    return {"accept": accept(note_id), "decline": DECLINE, "cancel": CANCEL}[answer]


def replace_at(state: str, index: int) -> str:
    """The state with the character at `index` swapped for a different, plausible one."""
    original = state[index]
    substitute = B64URL[(B64URL.index(original) + 1) % len(B64URL)] if original in B64URL else "A"
    return state[:index] + substitute + state[index + 1 :]


def spec(kid: str, fill: int) -> str:
    secret = base64.urlsafe_b64encode(bytes([fill]) * 32).rstrip(b"=").decode()
    return f"{kid}:{secret}"


def assert_refused_and_untouched(flow: Flow, reply: dict[str, Any], notes: int = 1) -> None:
    assert error_of(reply) == STATE_ERROR
    assert flow.untouched(notes)


@per_kind
def test_changing_any_single_character_of_the_state_is_refused(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    assert state.count(".") == 2

    refused = [
        index
        for index in range(len(state))
        if error_of(flow.answer(kind, TITLE, replace_at(state, index), accept(note.id)))
        == STATE_ERROR
    ]

    assert refused == list(range(len(state)))
    assert flow.untouched(1)
    assert flow.live(note.id) is not None
    assert structured(flow.answer(kind, TITLE, state, accept(note.id)))["outcome"] == kind.done


@per_kind
@pytest.mark.parametrize(
    "mangle",
    [
        "empty",
        "truncated",
        "extended",
        "doubled",
        "no-version",
        "other-version",
        "padded",
        "whitespace",
        "lowercased",
        "body-only",
        "oversized",
    ],
)
def test_a_structurally_altered_state_is_refused(flow: Flow, kind: Kind, mangle: str) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    _, kid, body = state.split(".")
    altered = {
        "empty": "",
        "truncated": state[:-1],
        "extended": state + "A",
        "doubled": state + state,
        "no-version": f"{kid}.{body}",
        "other-version": f"v2.{kid}.{body}",
        "padded": state + "==",
        "whitespace": f" {state}\n",
        "lowercased": state.lower(),
        "body-only": body,
        "oversized": state + "A" * 5000,
    }[mangle]
    assert altered != state

    reply = flow.answer(kind, TITLE, altered, accept(note.id))

    assert_refused_and_untouched(flow, reply)


@per_kind
@pytest.mark.parametrize("other_keys", ["fresh-ring", "same-kid-other-secret"])
def test_a_state_sealed_by_another_key_ring_is_refused(
    flow: Flow, kind: Kind, other_keys: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    if other_keys == "fresh-ring":
        sealer, opener = flow, flow.with_keys(KeyRing.generate_spec())
    else:
        sealer, opener = flow.with_keys(spec("k1", 1)), flow.with_keys(spec("k1", 2))
    state, _ = sealer.ask(kind, TITLE)

    for answer in ("accept", "decline", "cancel"):
        reply = opener.answer(kind, TITLE, state, response(answer, note.id))
        assert_refused_and_untouched(flow, reply)


@per_kind
def test_a_rotated_ring_still_opens_states_sealed_with_its_older_key(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    old = flow.with_keys(spec("old", 1))
    rotated = flow.with_keys(f"{spec('new', 2)},{spec('old', 1)}")
    state, _ = old.ask(kind, TITLE)

    reply = rotated.answer(kind, TITLE, state, accept(note.id))

    assert structured(reply)["outcome"] == kind.done


@per_kind
@ANSWERS
def test_another_principal_cannot_use_the_state_even_with_access_to_the_workspace(
    flow: Flow, kind: Kind, answer: str
) -> None:
    flow.grant("bob", WS)
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE, principal="alice")

    reply = flow.answer(kind, TITLE, state, response(answer, note.id), principal="bob")

    assert_refused_and_untouched(flow, reply)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id)))["outcome"] == kind.done


@per_kind
@ANSWERS
@pytest.mark.parametrize("title", ["Budget", "tps report", "TPS report "])
def test_a_state_is_refused_for_another_title(
    flow: Flow, kind: Kind, answer: str, title: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    flow.seed("Budget", "budget.md")
    state, _ = flow.ask(kind, TITLE)

    reply = flow.answer(kind, title, state, response(answer, note.id))

    assert_refused_and_untouched(flow, reply, notes=2)


@per_kind
@ANSWERS
def test_a_state_is_refused_for_another_workspace(flow: Flow, kind: Kind, answer: str) -> None:
    note = flow.seed(TITLE, "tps.md")
    flow.seed(TITLE, "tps.md", workspace=OTHER_WS)
    state, _ = flow.ask(kind, TITLE)

    reply = flow.answer(kind, TITLE, state, response(answer, note.id), workspace=OTHER_WS)

    assert_refused_and_untouched(flow, reply, notes=2)


@pytest.mark.parametrize(("issued", "used"), [(DELETE, ARCHIVE), (ARCHIVE, DELETE)], ids=str)
@ANSWERS
@pytest.mark.parametrize("key", ["own-key", "issuing-key"])
def test_a_state_for_one_action_never_confirms_the_other(
    flow: Flow, issued: Kind, used: Kind, answer: str, key: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(issued, TITLE)
    answer_key = used.key if key == "own-key" else issued.key

    reply = flow.call_tool(
        used.tool,
        {"workspaceUri": WS, "title": TITLE},
        responses={answer_key: response(answer, note.id)},
        state=state,
    )

    assert_refused_and_untouched(flow, reply)
    live = flow.live(note.id)
    assert live is not None and (live.version, live.archived) == (1, False)


@per_kind
@ANSWERS
def test_an_expired_state_is_refused(flow: Flow, kind: Kind, answer: str) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    flow.clock.advance(STATE_TTL + 3600)

    reply = flow.answer(kind, TITLE, state, response(answer, note.id))

    assert_refused_and_untouched(flow, reply)


@per_kind
def test_a_state_from_the_future_is_refused(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    flow.clock.advance(3600)
    state, _ = flow.ask(kind, TITLE)
    flow.clock.advance(-3600)

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert_refused_and_untouched(flow, reply)


@per_kind
@ANSWERS
def test_a_state_issued_by_another_deployment_with_the_same_keys_is_refused(
    flow: Flow, kind: Kind, answer: str, tmp_path: Path
) -> None:
    note = flow.seed(TITLE, "tps.md")
    elsewhere = replace(flow.settings, db_url=f"sqlite:///{tmp_path}/elsewhere.db")
    state, _ = Flow(elsewhere, flow.engine, flow.clock).ask(kind, TITLE)

    reply = flow.answer(kind, TITLE, state, response(answer, note.id))

    assert_refused_and_untouched(flow, reply)


@per_kind
def test_another_server_on_the_same_database_and_keys_confirms_the_state(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    assert flow.settings.state_keys is not None
    worker = flow.with_keys(flow.settings.state_keys)

    reply = worker.answer(kind, TITLE, state, accept(note.id))

    assert structured(reply)["outcome"] == kind.done
