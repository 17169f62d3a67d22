"""Round-2 races across real server processes on one SQLite file.

N servers start once for the module. Each trial creates fresh notes, runs round 1, then releases
the N round-2 requests at once (one client thread per server pipe, behind a barrier) and checks
both the replies and the database rows. The contract under test (tools/confirm.py):

* exactly one transaction commits per confirmation nonce: one nonce row, one audit row, and the
  note deleted once at most;
* a racer repeating the committed answer exactly gets the recorded outcome replayed, nothing
  mutated; any other use of a consumed nonce is -32602; never -32603, never "database is locked".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency.harness import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    STATE_REJECTED,
    WORKSPACE,
    Db,
    Server,
    accept,
    create_note,
    decline,
    generate_keys,
    prepare_database,
    race,
    round1,
    start_servers,
    state_nonce,
    stop_servers,
    tool_params,
)

PROCESSES = 8
TRIALS_SAME_ANSWER = 60
TRIALS_DIFFERENT_NOTES = 60
TRIALS_DECLINE_VS_ACCEPT = 50
TRIALS_TWO_STATES = 50
TOOL = "notes_delete"


@dataclass
class Cluster:
    servers: list[Server]
    db: Db
    keys: str

    def server(self, index: int) -> Server:
        return self.servers[index % len(self.servers)]

    def round2_lines(self, title: str, plans: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
        """One request line per server: plans[i] = (requestState, inputResponses)."""
        arguments = {"workspaceUri": WORKSPACE, "title": title}
        return [
            server.encode("tools/call", tool_params(TOOL, arguments, state=state, responses=answer))
            for server, (state, answer) in zip(self.servers, plans, strict=True)
        ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp("race")
    url = f"sqlite:///{root}/notes.db"
    keys = generate_keys()
    prepare_database(url)
    # Half the servers claim and delete through the SQLite fast path, half through the portable
    # Core implementation: both race for the same nonces on the same file.
    servers = start_servers(url, keys, root, PROCESSES, store_impls=("auto", "core"))
    try:
        yield Cluster(servers, Db(root / "notes.db"), keys)
    finally:
        stop_servers(servers)


@pytest.fixture(autouse=True)
def quiet_logs(cluster: Cluster) -> Iterator[None]:
    """After each test: no server logged a traceback, an internal error or a lock timeout."""
    yield
    for index, server in enumerate(cluster.servers):
        assert server.alarms() == [], f"server {index}:\n{server.stderr_text()[-4000:]}"


# -- reply classification ------------------------------------------------------------------


def success(reply: dict[str, Any]) -> dict[str, Any] | None:
    """The structured content of a complete, non-error result; None for anything else."""
    result = reply.get("result")
    if result is None or result.get("isError") or result.get("resultType") != "complete":
        return None
    content: dict[str, Any] = result["structuredContent"]
    return content


def is_rejected(reply: dict[str, Any]) -> bool:
    error = reply.get("error")
    return error is not None and error == {"code": INVALID_PARAMS, "message": STATE_REJECTED}


def never_internal(replies: list[dict[str, Any]], trial: int) -> None:
    for reply in replies:
        assert reply.get("error", {}).get("code") != INTERNAL_ERROR, (trial, reply)
        assert "locked" not in json.dumps(reply), (trial, reply)


def deleted_once(
    cluster: Cluster, before: tuple[int, int, int], nonce: str, note_id: str
) -> dict[str, Any]:
    """The rows of exactly one committed delete under `nonce`; returns its recorded result."""
    db = cluster.db
    assert db.note(note_id) is None
    recorded = db.nonces([nonce])
    assert list(recorded) == [nonce] and recorded[nonce][0] == "deleted", recorded
    assert db.audits([nonce]) == [(nonce, "deleted", note_id)]
    notes, nonces, audits = db.counts()
    assert (notes, nonces, audits) == (before[0] - 1, before[1] + 1, before[2] + 1)
    result: dict[str, Any] = json.loads(recorded[nonce][1] or "null")
    assert result["noteId"] == note_id and result["deleted"] is True
    return result


# -- variants ------------------------------------------------------------------------------


def test_same_state_same_answer_deletes_once_and_replays_the_outcome(cluster: Cluster) -> None:
    """(a) N racers send the identical accept: one transaction deletes, the rest replay it."""
    for trial in range(TRIALS_SAME_ANSWER):
        title = f"race same {trial}"
        note_id = create_note(cluster.server(trial), title, f"same/{trial}.md")
        asked = round1(cluster.server(trial + 1), TOOL, title)
        assert asked.candidates == [note_id]
        nonce = state_nonce(cluster.keys, asked.state)
        before = cluster.db.counts()

        plan = (asked.state, accept(TOOL, note_id))
        replies = race(cluster.servers, cluster.round2_lines(title, [plan] * PROCESSES))

        never_internal(replies, trial)
        recorded = deleted_once(cluster, before, nonce, note_id)
        outcomes = [success(reply) for reply in replies]
        assert any(outcome is not None for outcome in outcomes), (trial, replies)
        for reply, outcome in zip(replies, outcomes, strict=True):
            assert outcome == recorded or is_rejected(reply), (trial, reply)


@pytest.mark.parametrize("offered", [PROCESSES, 3], ids=["one-note-per-racer", "three-notes"])
def test_same_state_different_notes_commits_exactly_one_choice(
    cluster: Cluster, offered: int
) -> None:
    """(b) The state offers several notes; racer i accepts note i % offered. One delete
    commits; every racer whose answer differs from the recorded one gets -32602. With one note
    per racer that is every racer but the winner."""
    for trial in range(TRIALS_DIFFERENT_NOTES // 2):
        title = f"race choice {offered} {trial}"
        created = [
            create_note(cluster.server(trial + i), title, f"choice/{offered}/{trial}/{i}.md")
            for i in range(offered)
        ]
        asked = round1(cluster.server(trial), TOOL, title)
        assert sorted(asked.candidates) == sorted(created)
        nonce = state_nonce(cluster.keys, asked.state)
        before = cluster.db.counts()

        choices = [asked.candidates[i % offered] for i in range(PROCESSES)]
        plans = [(asked.state, accept(TOOL, choice)) for choice in choices]
        replies = race(cluster.servers, cluster.round2_lines(title, plans))

        never_internal(replies, trial)
        winners = {outcome["noteId"] for r in replies if (outcome := success(r)) is not None}
        assert len(winners) == 1, (trial, replies)
        winner = winners.pop()
        recorded = deleted_once(cluster, before, nonce, winner)
        for reply, choice in zip(replies, choices, strict=True):
            if choice == winner:
                assert success(reply) == recorded or is_rejected(reply), (trial, reply)
            else:
                assert is_rejected(reply), (trial, reply)
        if offered == PROCESSES:
            assert sum(success(r) is not None for r in replies) == 1, (trial, replies)
        for note_id in created:
            assert cluster.db.note(note_id) == (None if note_id == winner else (1, 0))


def test_decline_racing_accept_commits_exactly_one_outcome(cluster: Cluster) -> None:
    """(c) Half the racers decline, half accept, same state: either the delete or the decline
    commits (one nonce row, one audit row); every other racer replays or gets -32602."""
    committed: Counter[str] = Counter()
    for trial in range(TRIALS_DECLINE_VS_ACCEPT):
        title = f"race decline {trial}"
        note_id = create_note(cluster.server(trial), title, f"decline/{trial}.md")
        asked = round1(cluster.server(trial + 1), TOOL, title)
        nonce = state_nonce(cluster.keys, asked.state)
        before = cluster.db.counts()

        # Alternate which half starts first so neither kind always sits on the same pipes.
        accepts = [(i + trial) % 2 == 0 for i in range(PROCESSES)]
        plans = [(asked.state, accept(TOOL, note_id) if a else decline(TOOL)) for a in accepts]
        replies = race(cluster.servers, cluster.round2_lines(title, plans))

        never_internal(replies, trial)
        recorded = cluster.db.nonces([nonce])
        assert list(recorded) == [nonce], (trial, recorded)
        outcome = recorded[nonce][0]
        committed[outcome] += 1
        if outcome == "deleted":
            result = deleted_once(cluster, before, nonce, note_id)
            for reply, accepted in zip(replies, accepts, strict=True):
                if accepted:
                    assert success(reply) == result or is_rejected(reply), (trial, reply)
                else:
                    assert is_rejected(reply), (trial, reply)
        else:
            assert outcome == "declined" and recorded[nonce][1] is None
            assert cluster.db.note(note_id) == (1, 0)
            assert cluster.db.audits([nonce]) == [(nonce, "declined", None)]
            assert cluster.db.counts() == (before[0], before[1] + 1, before[2] + 1)
            declined = {"deleted": False, "outcome": "declined"}
            assert [success(r) for r in replies].count(declined) == 1, (trial, replies)
            assert sum(is_rejected(r) for r in replies) == PROCESSES - 1, (trial, replies)
    print(f"decline vs accept: committed outcomes {dict(committed)}")
    assert sum(committed.values()) == TRIALS_DECLINE_VS_ACCEPT


def test_two_states_for_one_note_delete_it_once(cluster: Cluster) -> None:
    """(d) Two round 1s for the same note, racing accepts under both states: one state's
    delete commits; the other reports the note gone and its nonce stays unclaimed."""
    for trial in range(TRIALS_TWO_STATES):
        title = f"race two states {trial}"
        note_id = create_note(cluster.server(trial), title, f"two/{trial}.md")
        states = [round1(cluster.server(trial + k), TOOL, title).state for k in (1, 2)]
        nonces = [state_nonce(cluster.keys, state) for state in states]
        assert nonces[0] != nonces[1]
        before = cluster.db.counts()

        picks = [(i + trial) % 2 for i in range(PROCESSES)]
        plans = [(states[p], accept(TOOL, note_id)) for p in picks]
        replies = race(cluster.servers, cluster.round2_lines(title, plans))

        never_internal(replies, trial)
        recorded = cluster.db.nonces(nonces)
        assert len(recorded) == 1, (trial, recorded)
        won = nonces.index(next(iter(recorded)))
        result = deleted_once(cluster, before, nonces[won], note_id)
        assert cluster.db.audits(nonces) == [(nonces[won], "deleted", note_id)]
        for reply, pick in zip(replies, picks, strict=True):
            if pick == won:
                assert success(reply) == result or is_rejected(reply), (trial, reply)
            else:
                assert note_gone(reply), (trial, reply)


def note_gone(reply: dict[str, Any]) -> bool:
    result = reply.get("result")
    if result is None or result.get("isError") is not True:
        return False
    return "no longer exists" in result["content"][0]["text"]
