"""A grant revoked between the rounds is re-checked inside round 2's write transaction.

Round 1 runs on process A, the grant is revoked by another writer, round 2 arrives at process B:
the answer is the fixed "workspace not available" -32602 and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency.harness import (
    WORKSPACE,
    Db,
    Server,
    accept,
    create_note,
    decline,
    generate_keys,
    prepare_database,
    revoke_grant,
    round1,
    start_servers,
    state_nonce,
    stop_servers,
)
from tests.helpers import workspace_refusal

TITLE = "revoked between rounds"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/notes.db"
    prepare_database(url)
    return url


@pytest.fixture
def keys() -> str:
    return generate_keys()


@pytest.fixture
def pair(tmp_path: Path, url: str, keys: str) -> Iterator[tuple[Server, Server]]:
    servers = start_servers(url, keys, tmp_path, 2)
    try:
        yield servers[0], servers[1]
    finally:
        stop_servers(servers)


@pytest.mark.parametrize("kind", ["accept", "decline"])
def test_round2_on_another_process_after_revoke_is_denied_and_writes_nothing(
    pair: tuple[Server, Server], url: str, keys: str, tmp_path: Path, kind: str
) -> None:
    a, b = pair
    db = Db(tmp_path / "notes.db")
    note_id = create_note(a, TITLE, "revoked.md")
    asked = round1(a, "notes_delete", TITLE)
    nonce = state_nonce(keys, asked.state)

    revoke_grant(url)
    answer: dict[str, Any] = (
        accept("notes_delete", note_id) if kind == "accept" else decline("notes_delete")
    )
    reply = b.tool(
        "notes_delete",
        {"workspaceUri": WORKSPACE, "title": TITLE},
        state=asked.state,
        responses=answer,
    )

    assert workspace_refusal(reply.get("error")), reply
    assert db.note(note_id) == (1, 0)
    assert db.nonces([nonce]) == {} and db.audits([nonce]) == []
    assert db.counts() == (1, 0, 0)
    assert a.alarms() == [] and b.alarms() == []
