"""A confirmed action reads the clock once inside its transaction: the nonce claim, the mutation
and the audit row carry the same moment."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.tools.confirm_support import ARCHIVE, DELETE, Flow, accept, structured


def _ticking(flow: Flow) -> None:
    """Every clock reading from now on is one millisecond later than the one before."""
    moments = iter(flow.clock() + timedelta(milliseconds=i) for i in range(1, 10_000))
    flow.services.clock = lambda: next(moments)


def test_an_archive_stamps_claim_note_and_audit_with_one_reading(flow: Flow) -> None:
    note = flow.seed("Report", "r.md")
    state, _ = flow.ask(ARCHIVE, "Report")
    _ticking(flow)

    assert structured(flow.answer(ARCHIVE, "Report", state, accept(note.id)))["archived"] is True

    archived = flow.live(note.id)
    [nonce] = flow.rows("consumed_nonces")
    [entry] = flow.rows("audit_log")
    assert archived is not None and isinstance(archived.archived_at, datetime)
    assert nonce["consumed_at"] == entry["at"] == archived.archived_at == archived.updated_at


def test_a_delete_and_a_decline_stamp_claim_and_audit_with_one_reading(flow: Flow) -> None:
    note = flow.seed("Report", "r.md")
    first, _ = flow.ask(DELETE, "Report")
    second, _ = flow.ask(DELETE, "Report")
    _ticking(flow)

    assert (
        structured(flow.answer(DELETE, "Report", first, {"action": "decline"}))["deleted"] is False
    )
    assert structured(flow.answer(DELETE, "Report", second, accept(note.id)))["deleted"] is True

    nonces = flow.rows("consumed_nonces")
    audits = flow.rows("audit_log")
    assert (
        [n["outcome"] for n in nonces] == [a["outcome"] for a in audits] == ["declined", "deleted"]
    )
    assert [n["consumed_at"] for n in nonces] == [a["at"] for a in audits]
    assert nonces[0]["consumed_at"] < nonces[1]["consumed_at"]
