"""notes_delete and notes_archive end to end through the in-process server: the two-round
confirmation (MRTR + form elicitation), every answer branch, replay, expiry, and failures inside
the write transaction, with the database effects asserted directly."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from notes_server.store import notes
from notes_server.store.engine import write_tx
from notes_server.store.notes import NoteRecord
from tests.helpers import workspace_refusal
from tests.tools.confirm_support import (
    ARCHIVE,
    BOTH_OR_NEITHER,
    CANCEL,
    CONFIRMATION_ERROR,
    DECLINE,
    DELETE,
    KINDS,
    MISSING_CAPABILITY,
    OTHER_WS,
    RESULT_META,
    STATE_ERROR,
    STATE_TTL,
    WS,
    Flow,
    Kind,
    accept,
    complete,
    error_of,
    expected_form,
    iso,
    note_uri,
    structured,
    tool_error,
)

TITLE = "TPS report"
per_kind = pytest.mark.parametrize("kind", KINDS, ids=str)


def args(title: str = TITLE, workspace: str = WS) -> dict[str, Any]:
    return {"workspaceUri": workspace, "title": title}


def done(kind: Kind, note: NoteRecord) -> dict[str, Any]:
    return {
        kind.flag: True,
        "outcome": kind.done,
        "noteId": note.id,
        "title": note.title,
        "uri": note_uri(note),
    }


def not_done(kind: Kind, outcome: str) -> dict[str, Any]:
    return {kind.flag: False, "outcome": outcome}


def unchanged(flow: Flow, note: NoteRecord) -> bool:
    return flow.live(note.id) == note


def archive_in_store(flow: Flow, note: NoteRecord) -> NoteRecord:
    with write_tx(flow.engine) as conn:
        archived = notes.update_fields(
            conn, note, now=flow.clock(), archived=True, archived_at=flow.clock()
        )
    assert archived is not None
    return archived


# -- round 1 ------------------------------------------------------------------------------


@per_kind
def test_a_single_matching_note_still_asks_the_user_to_pick_and_confirm(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "reports/tps.md")

    reply = flow.call_tool(kind.tool, args())

    assert "error" not in reply
    result = reply["result"]
    assert isinstance(result["requestState"], str) and result["requestState"]
    assert result == {
        "resultType": "input_required",
        "inputRequests": {
            kind.key: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": (
                        f"One note matches 'TPS report' in {WS}. "
                        f"Choose the note to {kind.verb} and confirm."
                    ),
                    "requestedSchema": expected_form(kind, [note]),
                },
            }
        },
        "requestState": result["requestState"],
        "_meta": RESULT_META,
    }
    assert flow.untouched(1)
    assert unchanged(flow, note)


@per_kind
def test_candidates_contain_the_title_case_insensitively_exact_first_then_newest(
    flow: Flow, kind: Kind
) -> None:
    older = flow.seed(TITLE, "a.md")
    flow.clock.advance(60)
    newer = flow.seed("tps REPORT", "b.md")
    flow.seed(TITLE, "elsewhere.md", workspace=OTHER_WS)
    archive_in_store(flow, flow.seed(TITLE, "archived.md"))
    flow.seed("TPS", "shorter.md")
    flow.clock.advance(60)
    draft = flow.seed("Old TPS report draft", "draft.md")

    _, request = flow.ask(kind, "Tps Report")

    assert request["params"]["message"] == (
        f"3 notes match 'Tps Report' in {WS}. Choose the note to {kind.verb} and confirm."
    )
    assert request["params"]["requestedSchema"] == expected_form(kind, [newer, older, draft])


@per_kind
def test_a_partial_title_offers_every_note_whose_title_contains_it(flow: Flow, kind: Kind) -> None:
    seeded = []
    for year in (2023, 2024, 2025):
        seeded.append(flow.seed(f"TPS report {year}", f"tps-{year}.md"))
        flow.clock.advance(60)
    flow.seed("Quarterly numbers", "numbers.md")

    state, request = flow.ask(kind, "tps REPORT")

    assert request["params"]["message"] == (
        f"3 notes match 'tps REPORT' in {WS}. Choose the note to {kind.verb} and confirm."
    )
    assert request["params"]["requestedSchema"] == expected_form(kind, seeded[::-1])
    chosen = seeded[0]
    assert structured(flow.answer(kind, "tps REPORT", state, accept(chosen.id))) == done(
        kind, chosen
    )


@per_kind
@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("ÜBER STRASSE", ["Über Straße", "Grüße über Straße"]),
        ("u\u0308ber", ["Über Straße", "Grüße über Straße"]),
        ("GRÜSSE", ["Grüße über Straße"]),
        ("ΣΟΦΊΑ", ["Σοφία"]),
    ],
    ids=["sharp-s", "decomposed", "folded-in-the-middle", "greek"],
)
def test_partial_titles_match_after_nfc_and_full_case_folding(
    flow: Flow, kind: Kind, argument: str, expected: list[str]
) -> None:
    by_title = {}
    for title in ("Über Straße", "Grüße über Straße", "Uber Strasse", "Σοφία"):
        flow.clock.advance(-60)  # each seeded note is older than the one before
        by_title[title] = flow.seed(title, f"{len(by_title)}.md")

    _, request = flow.ask(kind, argument)

    offered = request["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    assert [choice["const"] for choice in offered] == [by_title[t].id for t in expected]


@per_kind
@pytest.mark.parametrize(
    ("argument", "expected"),
    [("100%", ["100% done"]), ("a_b", ["a_b plan"]), ("x/y", ["x/y notes"])],
    ids=["percent", "underscore", "escape-character"],
)
def test_like_wildcards_in_the_title_match_only_themselves(
    flow: Flow, kind: Kind, argument: str, expected: list[str]
) -> None:
    by_title = {}
    for title in ("100% done", "100 percent", "a_b plan", "axb plan", "x/y notes", "xy notes"):
        flow.clock.advance(-60)
        by_title[title] = flow.seed(title, f"{len(by_title)}.md")

    _, request = flow.ask(kind, argument)

    offered = request["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    assert [choice["const"] for choice in offered] == [by_title[t].id for t in expected]


@per_kind
def test_the_form_never_shows_two_candidates_alike_even_for_titles_stored_before_the_checks(
    flow: Flow, kind: Kind
) -> None:
    plain = flow.seed("TPS report", "a.md")
    hidden = flow.seed("TPS\u200b report", "b.md")  # written before titles were checked
    spaced = flow.seed("TPS \u00a0report\u2003", "c.md")

    _, request = flow.ask(kind, "TPS")

    offered = request["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    updated = iso(flow.clock())
    assert sorted(offered, key=lambda choice: str(choice["title"])) == [
        {"const": plain.id, "title": f"TPS report \u2014 a.md (updated {updated})"},
        {"const": spaced.id, "title": f"TPS report \u2014 c.md (updated {updated})"},
        {"const": hidden.id, "title": f"TPS<U+200B> report \u2014 b.md (updated {updated})"},
    ]


@per_kind
@pytest.mark.parametrize("matching", [11, 12])
def test_more_than_ten_matches_offer_the_ten_newest_and_say_so(
    flow: Flow, kind: Kind, matching: int
) -> None:
    seeded = []
    for index in range(matching):
        seeded.append(flow.seed(TITLE, f"n{index:02}.md"))
        flow.clock.advance(1)
    newest_ten = list(reversed(seeded))[:10]

    state, request = flow.ask(kind, TITLE)

    assert request["params"]["message"] == (
        f"{matching} notes match 'TPS report' in {WS}; showing 10: exact titles first, then "
        f"the most recently updated. {matching - 10} more matched: to see them, call "
        f"{kind.tool} again with more of the title. Choose the note to {kind.verb} and confirm."
    )
    assert request["params"]["requestedSchema"] == expected_form(kind, newest_ten)
    oldest = seeded[0]
    assert error_of(flow.answer(kind, TITLE, state, accept(oldest.id))) == CONFIRMATION_ERROR
    assert flow.untouched(matching)


@per_kind
def test_exactly_ten_matches_are_all_offered_without_a_cap_notice(flow: Flow, kind: Kind) -> None:
    seeded = []
    for index in range(10):
        seeded.append(flow.seed(TITLE, f"n{index:02}.md"))
        flow.clock.advance(1)

    _, request = flow.ask(kind, TITLE)

    assert request["params"]["message"] == (
        f"10 notes match 'TPS report' in {WS}. Choose the note to {kind.verb} and confirm."
    )
    assert request["params"]["requestedSchema"] == expected_form(kind, list(reversed(seeded)))


@per_kind
def test_no_matching_note_is_a_tool_error_not_a_question(flow: Flow, kind: Kind) -> None:
    flow.seed("Something else", "else.md")
    archive_in_store(flow, flow.seed(TITLE, "archived.md"))
    flow.seed(TITLE, "elsewhere.md", workspace=OTHER_WS)

    reply = flow.call_tool(kind.tool, args())

    assert tool_error(reply) == (
        "No matching note in this workspace: no note title contains 'TPS report', so there is "
        f"nothing to {kind.verb}. Use notes_search to find the note's title."
    )
    assert reply["result"]["_meta"] == RESULT_META
    assert flow.untouched(3)


@per_kind
@pytest.mark.parametrize("role", [None, "read"], ids=["no-grant", "read-grant"])
def test_round_one_needs_write_access_to_the_workspace(
    flow: Flow, kind: Kind, role: str | None
) -> None:
    flow.seed(TITLE, "tps.md")
    if role is not None:
        flow.grant("bob", WS, role)

    reply = flow.call_tool(kind.tool, args(), principal="bob")

    assert workspace_refusal(error_of(reply))
    assert flow.untouched(1)


@per_kind
def test_state_seals_principal_tool_phase_arguments_candidates_and_a_fresh_nonce(
    flow: Flow, kind: Kind
) -> None:
    first = flow.seed(TITLE, "a.md")
    flow.clock.advance(5)
    second = flow.seed(TITLE, "b.md")

    state, _ = flow.ask(kind, TITLE)
    again, _ = flow.ask(kind, TITLE)

    claims = flow.services.sealer.open(state)
    assert set(claims) == {"p", "m", "t", "ph", "a", "aud", "c", "n", "iat", "exp"}
    assert claims["aud"] == flow.settings.state_audience
    assert claims["p"] == "alice"
    assert claims["m"] == "tools/call"
    assert claims["t"] == kind.tool
    assert claims["ph"] == f"{kind.verb}/confirm"
    assert claims["c"] == [[second.id, 1], [first.id, 1]]
    assert len(claims["n"]) == 32 and int(claims["n"], 16) >= 0  # 128 bits, hex
    assert claims["exp"] - claims["iat"] == STATE_TTL
    other = flow.services.sealer.open(again)
    assert other["n"] != claims["n"]
    assert state != again


@per_kind
def test_another_spelling_of_the_same_workspace_confirms_the_same_request(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    spelled = "FILE:///home/alice/%6Eotes"

    state, request = flow.ask(kind, TITLE, workspace=spelled)
    assert f"matches 'TPS report' in {WS}." in request["params"]["message"]

    reply = flow.answer(kind, TITLE, state, accept(note.id), workspace=WS)

    assert structured(reply) == done(kind, note)


# -- capabilities -------------------------------------------------------------------------


@per_kind
@pytest.mark.parametrize(
    "caps",
    [{}, {"elicitation": {"url": {}}}, {"roots": {}, "sampling": {}}, {"elicitation": True}],
    ids=["none", "url-only", "other-capabilities", "not-an-object"],
)
def test_every_round_requires_the_form_elicitation_capability(
    flow: Flow, kind: Kind, caps: dict[str, Any]
) -> None:
    note = flow.seed(TITLE, "tps.md")

    assert error_of(flow.call_tool(kind.tool, args(), caps=caps)) == MISSING_CAPABILITY
    state, _ = flow.ask(kind, TITLE)
    for answer in (accept(note.id), DECLINE, CANCEL):
        reply = flow.answer(kind, TITLE, state, answer, caps=caps)
        assert error_of(reply) == MISSING_CAPABILITY
    assert flow.untouched(1)

    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


@per_kind
@pytest.mark.parametrize(
    "caps",
    [{"elicitation": {}}, {"elicitation": {"form": {}}}, {"elicitation": {"form": {}, "url": {}}}],
    ids=["empty-means-form", "form", "form-and-url"],
)
def test_form_capability_may_be_declared_in_any_accepted_shape(
    flow: Flow, kind: Kind, caps: dict[str, Any]
) -> None:
    note = flow.seed(TITLE, "tps.md")

    round_one = flow.call_tool(kind.tool, args(), caps=caps)
    state = round_one["result"]["requestState"]
    reply = flow.answer(kind, TITLE, state, accept(note.id), caps=caps)

    assert structured(reply) == done(kind, note)


# -- round 2 parameters -------------------------------------------------------------------


@per_kind
def test_input_responses_and_request_state_must_come_together(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)

    only_answers = flow.call_tool(kind.tool, args(), responses={kind.key: accept(note.id)})
    only_state = flow.call_tool(kind.tool, args(), state=state)

    assert error_of(only_answers) == BOTH_OR_NEITHER
    assert error_of(only_state) == BOTH_OR_NEITHER
    assert flow.untouched(1)


@per_kind
@pytest.mark.parametrize("responses", ["empty", "other-tool-key"])
def test_a_missing_answer_asks_again_with_a_fresh_state(
    flow: Flow, kind: Kind, responses: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, request = flow.ask(kind, TITLE)
    other = ARCHIVE if kind is DELETE else DELETE
    answers = {} if responses == "empty" else {other.key: accept(note.id)}

    reply = flow.call_tool(kind.tool, args(), responses=answers, state=state)

    result = reply["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {kind.key: request}
    assert result["requestState"] != state
    assert flow.untouched(1)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


# -- accept -------------------------------------------------------------------------------


@per_kind
def test_accept_with_confirm_applies_once_records_the_nonce_and_one_audit_row(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "reports/tps.md")
    keep = flow.seed(TITLE, "reports/keep.md")
    asked_at = flow.clock()
    state, _ = flow.ask(kind, TITLE)
    claims = flow.services.sealer.open(state)
    flow.clock.advance(30)

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert structured(reply) == done(kind, note)
    assert reply["result"]["_meta"] == RESULT_META
    assert flow.applied(kind, note.id)
    assert unchanged(flow, keep)
    assert flow.count("notes") == (1 if kind is DELETE else 2)
    if kind is ARCHIVE:
        archived = flow.live(note.id)
        assert archived is not None
        assert (archived.version, archived.archived_at) == (2, flow.clock())
    [nonce] = flow.rows("consumed_nonces")
    assert nonce == {
        "nonce": claims["n"],
        "principal": "alice",
        "tool": kind.tool,
        "outcome": kind.done,
        "answer_digest": nonce["answer_digest"],
        "result_json": json.dumps(done(kind, note)),
        "consumed_at": flow.clock(),
        "expires_at": asked_at + timedelta(seconds=STATE_TTL),
    }
    assert isinstance(nonce["answer_digest"], str) and len(nonce["answer_digest"]) == 64
    [row] = flow.rows("audit_log")
    assert row == {
        "id": row["id"],
        "at": flow.clock(),
        "principal": "alice",
        "tool": kind.tool,
        "outcome": kind.done,
        "workspace": WS,
        "note_id": note.id,
        "note_title": TITLE,
        "note_path": "reports/tps.md",
        "nonce": claims["n"],
    }


INVALID_ANSWERS: dict[str, Any] = {
    "confirm-string": accept("OFFERED", confirm="true"),
    "confirm-one": accept("OFFERED", confirm=1),
    "content-missing": {"action": "accept"},
    "content-null": {"action": "accept", "content": None},
    "content-not-object": {"action": "accept", "content": ["OFFERED", True]},
    "extra-key": {"action": "accept", "content": {"note_id": "OFFERED", "confirm": True, "x": 1}},
    "confirm-missing": {"action": "accept", "content": {"note_id": "OFFERED"}},
    "note-id-missing": {"action": "accept", "content": {"confirm": True}},
    "note-id-not-offered": accept("NOT-OFFERED"),
    "note-id-unknown": accept("note_doesnotexist"),
    "note-id-not-string": accept(1),
    "action-unknown": {"action": "approve", "content": {"note_id": "OFFERED", "confirm": True}},
    "action-missing": {"content": {"note_id": "OFFERED", "confirm": True}},
    "answer-not-object": "accept",
}
# A response that is not even an object is refused by the protocol layer, for every tool.
MALFORMED_RESPONSE = {
    "code": -32602,
    "message": "Invalid params: every inputResponses entry must be an object",
}


def _fill(value: Any, offered: str, other: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, offered, other) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, offered, other) for v in value]
    return {"OFFERED": offered, "NOT-OFFERED": other}.get(value, value)


@per_kind
@pytest.mark.parametrize("case", list(INVALID_ANSWERS))
def test_an_invalid_confirmation_is_refused_and_the_state_stays_usable(
    flow: Flow, kind: Kind, case: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    not_offered = flow.seed("Another title", "other.md")
    state, _ = flow.ask(kind, TITLE)
    answer = _fill(INVALID_ANSWERS[case], note.id, not_offered.id)

    reply = flow.answer(kind, TITLE, state, answer)

    expected = MALFORMED_RESPONSE if case == "answer-not-object" else CONFIRMATION_ERROR
    assert error_of(reply) == expected
    assert flow.untouched(2)
    assert unchanged(flow, note) and unchanged(flow, not_offered)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


# -- decline and cancel -------------------------------------------------------------------


@per_kind
def test_decline_consumes_the_state_audits_it_and_changes_nothing(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, "tps report")
    claims = flow.services.sealer.open(state)

    reply = flow.answer(kind, "tps report", state, DECLINE)

    assert structured(reply) == not_done(kind, "declined")
    assert unchanged(flow, note)
    [nonce] = flow.rows("consumed_nonces")
    assert (nonce["nonce"], nonce["outcome"], nonce["answer_digest"], nonce["result_json"]) == (
        claims["n"],
        "declined",
        None,
        None,
    )
    [row] = flow.rows("audit_log")
    assert {k: v for k, v in row.items() if k != "id"} == {
        "at": flow.clock(),
        "principal": "alice",
        "tool": kind.tool,
        "outcome": "declined",
        "workspace": WS,
        "note_id": None,
        "note_title": "tps report",
        "note_path": None,
        "nonce": claims["n"],
    }


SAID_NO: dict[str, Any] = {
    "offered-note": accept("OFFERED", confirm=False),
    "note-not-offered": accept("NOT-OFFERED", confirm=False),
    "no-note-picked": {"action": "accept", "content": {"confirm": False}},
}


@per_kind
@pytest.mark.parametrize("case", list(SAID_NO))
def test_accepting_the_form_with_confirm_false_is_a_decline(
    flow: Flow, kind: Kind, case: str
) -> None:
    note = flow.seed(TITLE, "tps.md")
    other = flow.seed("Another title", "other.md")
    state, _ = flow.ask(kind, TITLE)
    claims = flow.services.sealer.open(state)

    reply = flow.answer(kind, TITLE, state, _fill(SAID_NO[case], note.id, other.id))

    assert structured(reply) == not_done(kind, "declined")
    assert unchanged(flow, note) and unchanged(flow, other)
    [nonce] = flow.rows("consumed_nonces")
    assert (nonce["nonce"], nonce["outcome"]) == (claims["n"], "declined")
    [row] = flow.rows("audit_log")
    assert (row["outcome"], row["note_id"], row["nonce"]) == ("declined", None, claims["n"])
    assert error_of(flow.answer(kind, TITLE, state, accept(note.id))) == STATE_ERROR
    assert unchanged(flow, note)


@per_kind
@pytest.mark.parametrize("retry", ["accept", "decline", "cancel"])
def test_a_declined_state_cannot_be_used_again(flow: Flow, kind: Kind, retry: str) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    flow.answer(kind, TITLE, state, DECLINE)
    answer = {"accept": accept(note.id), "decline": DECLINE, "cancel": CANCEL}[retry]

    reply = flow.answer(kind, TITLE, state, answer)

    assert error_of(reply) == STATE_ERROR
    assert unchanged(flow, note)
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)


@per_kind
def test_cancel_touches_nothing_and_the_state_can_still_be_accepted(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)

    first = flow.answer(kind, TITLE, state, CANCEL)
    second = flow.answer(kind, TITLE, state, CANCEL)

    assert structured(first) == not_done(kind, "cancelled")
    assert structured(second) == not_done(kind, "cancelled")
    assert flow.untouched(1)
    assert unchanged(flow, note)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)


# -- replay -------------------------------------------------------------------------------


@per_kind
def test_an_exact_repeat_of_a_committed_accept_returns_the_recorded_outcome(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "a.md")
    other = flow.seed(TITLE, "b.md")
    state, _ = flow.ask(kind, TITLE)
    first = flow.answer(kind, TITLE, state, accept(note.id))
    flow.clock.advance(10)

    repeat = flow.answer(kind, TITLE, state, accept(note.id))

    assert complete(repeat) == complete(first)
    assert structured(repeat) == done(kind, note)
    assert unchanged(flow, other)
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)
    if kind is ARCHIVE:
        archived = flow.live(note.id)
        assert archived is not None and archived.version == 2


@per_kind
def test_replaying_a_committed_accept_after_the_grant_is_revoked_is_refused(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "a.md")
    state, _ = flow.ask(kind, TITLE)
    structured(flow.answer(kind, TITLE, state, accept(note.id)))
    flow.revoke("alice", WS)

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert workspace_refusal(error_of(reply))
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)


@per_kind
@pytest.mark.parametrize("retry", ["other-note", "decline", "cancel", "confirm-false"])
def test_any_other_answer_after_a_committed_accept_is_refused(
    flow: Flow, kind: Kind, retry: str
) -> None:
    note = flow.seed(TITLE, "a.md")
    other = flow.seed(TITLE, "b.md")
    state, _ = flow.ask(kind, TITLE)
    structured(flow.answer(kind, TITLE, state, accept(note.id)))
    answer = {
        "other-note": accept(other.id),
        "decline": DECLINE,
        "cancel": CANCEL,
        "confirm-false": accept(note.id, confirm=False),
    }[retry]

    reply = flow.answer(kind, TITLE, state, answer)

    assert error_of(reply) == STATE_ERROR
    assert unchanged(flow, other)
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)


# -- expiry -------------------------------------------------------------------------------


@per_kind
def test_a_state_is_accepted_until_state_ttl_has_elapsed(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    flow.clock.advance(STATE_TTL - 1)

    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


@per_kind
@pytest.mark.parametrize("answer", ["accept", "decline", "cancel"])
def test_a_state_older_than_state_ttl_is_refused(flow: Flow, kind: Kind, answer: str) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    flow.clock.advance(STATE_TTL)
    response = {"accept": accept(note.id), "decline": DECLINE, "cancel": CANCEL}[answer]

    reply = flow.answer(kind, TITLE, state, response)

    assert error_of(reply) == STATE_ERROR
    assert flow.untouched(1)
    assert unchanged(flow, note)
    fresh, _ = flow.ask(kind, TITLE)
    assert structured(flow.answer(kind, TITLE, fresh, accept(note.id))) == done(kind, note)


# -- failures inside the write transaction ------------------------------------------------


@per_kind
def test_a_note_deleted_between_rounds_fails_and_consumes_nothing(flow: Flow, kind: Kind) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    with write_tx(flow.engine) as conn:
        assert notes.delete_note(conn, note)

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert tool_error(reply) == (
        f"The chosen note no longer exists in this workspace; nothing was {kind.done}."
    )
    assert flow.untouched(0)


@per_kind
def test_a_note_moved_to_another_workspace_between_rounds_is_left_alone(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    move = flow.call_tool(
        "notes_move", {"workspaceUri": WS, "noteId": note.id, "targetWorkspaceUri": OTHER_WS}
    )
    assert structured(move)["note"]["uri"] == f"{OTHER_WS}/tps.md"

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert tool_error(reply) == (
        f"The chosen note no longer exists in this workspace; nothing was {kind.done}."
    )
    assert flow.untouched(1)
    moved = flow.live(note.id)
    assert moved is not None
    assert (moved.workspace, moved.version, moved.archived) == (OTHER_WS, 2, False)


@per_kind
def test_a_note_updated_between_rounds_fails_on_the_version_and_can_be_asked_again(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    update = flow.call_tool(
        "notes_update", {"workspaceUri": WS, "noteId": note.id, "body": "changed"}
    )
    assert structured(update)["note"]["version"] == 2

    reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert tool_error(reply) == (
        f"The chosen note changed after the confirmation was requested (version 1 -> 2); "
        f"nothing was {kind.done}. Call {kind.tool} again to confirm the current version."
    )
    assert flow.untouched(1)
    current = flow.live(note.id)
    assert current is not None and (current.version, current.archived) == (2, False)
    fresh, _ = flow.ask(kind, TITLE)
    assert structured(flow.answer(kind, TITLE, fresh, accept(note.id))) == done(kind, current)


@per_kind
def test_a_revoked_grant_is_denied_and_the_same_state_works_after_regranting(
    flow: Flow, kind: Kind
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    flow.revoke("alice", WS)

    for answer in (accept(note.id), DECLINE):
        assert workspace_refusal(error_of(flow.answer(kind, TITLE, state, answer)))
    assert flow.untouched(1)
    assert unchanged(flow, note)

    flow.grant("alice", WS)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)
    assert (flow.count("consumed_nonces"), flow.count("audit_log")) == (1, 1)


@per_kind
def test_a_failure_after_the_nonce_claim_rolls_back_claim_and_change(
    flow: Flow, kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notes_server.store import audit

    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)

    def broken_audit(*_args: Any, **_kw: Any) -> None:
        raise RuntimeError("audit storage failed")

    with monkeypatch.context() as patch:
        patch.setattr(audit, "record", broken_audit)
        reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert error_of(reply) == {"code": -32603, "message": "Internal error"}
    assert flow.untouched(1)
    assert unchanged(flow, note)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


@per_kind
def test_a_row_that_changes_under_the_mutation_rolls_back_the_claim(
    flow: Flow, kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(kind, TITLE)
    tool_class = type(flow.server.registry.get(kind.tool))

    with monkeypatch.context() as patch:
        patch.setattr(tool_class, "apply", lambda self, conn, row, now, principal: False)
        reply = flow.answer(kind, TITLE, state, accept(note.id))

    assert tool_error(reply) == f"The chosen note changed; nothing was {kind.done}."
    assert flow.untouched(1)
    assert structured(flow.answer(kind, TITLE, state, accept(note.id))) == done(kind, note)


# -- archive and restore ------------------------------------------------------------------


def search_ids(flow: Flow, **extra: Any) -> list[tuple[str, bool]]:
    found = structured(flow.call_tool("notes_search", {"workspaceUri": WS, **extra}))
    return [(hit["id"], hit["archived"]) for hit in found["notes"]]


def test_an_archived_note_leaves_search_until_it_is_restored(flow: Flow) -> None:
    note = flow.seed(TITLE, "tps.md")
    state, _ = flow.ask(ARCHIVE, TITLE)
    structured(flow.answer(ARCHIVE, TITLE, state, accept(note.id)))

    assert search_ids(flow) == []
    assert search_ids(flow, query="TPS") == []
    assert search_ids(flow, includeArchived=True) == [(note.id, True)]
    assert tool_error(flow.call_tool(DELETE.tool, args())).startswith("No matching note")

    restored = structured(flow.call_tool("notes_restore", {"workspaceUri": WS, "noteId": note.id}))

    assert restored["note"]["id"] == note.id
    assert (restored["note"]["archived"], restored["note"]["version"]) == (False, 3)
    assert search_ids(flow) == [(note.id, False)]
    live = flow.live(note.id)
    assert live is not None and live.archived_at is None


def test_restore_refuses_a_note_that_is_not_archived_or_does_not_exist(flow: Flow) -> None:
    note = flow.seed(TITLE, "tps.md")

    not_archived = flow.call_tool("notes_restore", {"workspaceUri": WS, "noteId": note.id})
    missing = flow.call_tool("notes_restore", {"workspaceUri": WS, "noteId": "note_nope"})

    assert tool_error(not_archived) == f"Note '{note.id}' is not archived; nothing to restore."
    assert tool_error(missing) == (
        "No note with id 'note_nope' in this workspace. Use notes_search to find note ids."
    )
    assert unchanged(flow, note)


# -- audit --------------------------------------------------------------------------------


def test_only_committed_deletes_archives_and_declines_are_audited_once_each(flow: Flow) -> None:
    deleted = flow.seed(TITLE, "deleted.md")
    archived = flow.seed("Plans", "plans.md")
    kept = flow.seed("Kept", "kept.md")

    def run(kind: Kind, title: str, *answers: dict[str, Any]) -> None:
        state, _ = flow.ask(kind, title)
        for answer in answers:
            flow.answer(kind, title, state, answer)
            flow.clock.advance(1)

    run(DELETE, "Kept", CANCEL, accept(kept.id, confirm="yes"))
    run(DELETE, TITLE, accept(deleted.id), accept(deleted.id), DECLINE)
    run(ARCHIVE, "Plans", accept(archived.id), accept(archived.id))
    run(ARCHIVE, "Kept", DECLINE, DECLINE)
    run(DELETE, "Kept", DECLINE)

    rows = flow.rows("audit_log")
    assert [(r["tool"], r["outcome"], r["note_id"]) for r in rows] == [
        ("notes_delete", "deleted", deleted.id),
        ("notes_archive", "archived", archived.id),
        ("notes_archive", "declined", None),
        ("notes_delete", "declined", None),
    ]
    assert flow.count("consumed_nonces") == 4
    assert {r["nonce"] for r in rows} == {n["nonce"] for n in flow.rows("consumed_nonces")}
    assert unchanged(flow, kept)
