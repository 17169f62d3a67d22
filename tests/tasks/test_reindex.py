"""`notes_reindex`: a workspace's notes embedded again, only that workspace's, as an ordinary
call or as a task with progress and a cancel between batches; refused without write access.
Needs the `semantic` extra (skipped without it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from notes_server.features.tasks.runner import TaskRunner
from notes_server.store import embedding, indexer
from notes_server.store.engine import read_tx
from notes_server.store.models import outbox_table
from tests.store.seed import insert_notes
from tests.tasks.conftest import NOTES, WAIT_S, Rpc, body

pytestmark = pytest.mark.skipif(not embedding.installed(), reason="needs the semantic extra")
THEIRS = "file:///home/bob/notes"


def reindex(rpc: Rpc, workspace: str = NOTES, **kw: Any) -> dict[str, Any]:
    return body(
        rpc("tools/call", {"name": "notes_reindex", "arguments": {"workspaceUri": workspace}}, **kw)
    )


def queued(engine: Engine) -> int:
    with read_tx(engine) as conn:
        return int(conn.execute(select(func.count()).select_from(outbox_table)).scalar_one())


@pytest.fixture
def notes_in_two_workspaces(migrated_engine: Engine, grant: Callable[..., str]) -> int:
    """40 notes of alice's (more than one indexer batch) and 3 of bob's, none embedded yet."""
    grant("alice", NOTES)
    grant("bob", THEIRS)
    insert_notes(migrated_engine, NOTES, [(f"Note {i}", f"body {i}") for i in range(40)])
    insert_notes(migrated_engine, THEIRS, [(f"Bob {i}", f"his {i}") for i in range(3)])
    return 40


def test_reindex_is_listed_as_a_write_that_is_safe_to_repeat(rpc: Rpc) -> None:
    tools = {t["name"]: t for t in body(rpc("tools/list"))["tools"]}
    hints = tools["notes_reindex"]["annotations"]
    assert (hints["readOnlyHint"], hints["destructiveHint"], hints["idempotentHint"]) == (
        False,
        False,
        True,
    )
    assert tools["notes_reindex"]["inputSchema"]["required"] == ["workspaceUri"]


def test_an_ordinary_reindex_embeds_every_note_of_the_workspace_and_only_those(
    rpc: Rpc, migrated_engine: Engine, notes_in_two_workspaces: int
) -> None:
    result = reindex(rpc, caps={})

    assert result["resultType"] == "complete" and result["isError"] is False
    assert result["structuredContent"] == {
        "queued": 40,
        "embeddedNotes": 40,
        "passages": 40,
        "pending": 0,
        "model": embedding.model_name(),
    }
    assert queued(migrated_engine) == 3  # bob's notes are still the background indexer's


def test_a_reindex_task_completes_with_its_counts(
    rpc: Rpc, runner: TaskRunner, notes_in_two_workspaces: int
) -> None:
    created = reindex(rpc)
    assert created["resultType"] == "task"
    assert runner.join(created["taskId"], WAIT_S)

    done = body(rpc("tasks/get", {"taskId": created["taskId"]}))

    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["embeddedNotes"] == 40
    assert done["result"]["structuredContent"]["pending"] == 0


def test_a_cancel_stops_between_batches_and_leaves_the_rest_queued(
    rpc: Rpc,
    runner: TaskRunner,
    migrated_engine: Engine,
    notes_in_two_workspaces: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cancellation arrives through the protocol right after the first batch committed."""
    task_ids: list[str] = []
    known = threading.Event()
    acks: list[dict[str, Any]] = []
    run_once = indexer.run_once

    def run_then_cancel(*args: Any, **kw: Any) -> tuple[int, int]:
        done = run_once(*args, **kw)
        if not acks:
            assert known.wait(WAIT_S)
            acks.append(rpc("tasks/cancel", {"taskId": task_ids[0]}))
        return done

    monkeypatch.setattr(indexer, "run_once", run_then_cancel)
    task_ids.append(reindex(rpc)["taskId"])
    known.set()
    assert runner.join(task_ids[0], WAIT_S)

    ended = body(rpc("tasks/get", {"taskId": task_ids[0]}))

    assert [body(a) for a in acks] == [{"resultType": "complete"}]
    committed = {
        "queued": 40,
        "embeddedNotes": indexer.BATCH,
        "passages": indexer.BATCH,
        "pending": 40 - indexer.BATCH,
        "model": embedding.model_name(),
    }
    assert ended["status"] == "cancelled"
    assert ended["statusMessage"] == (
        "Cancelled; committed before stopping: " + json.dumps(committed, separators=(",", ":"))
    )
    assert queued(migrated_engine) == 40 - indexer.BATCH + 3


def test_a_reader_may_not_reindex(
    rpc: Rpc, migrated_engine: Engine, grant: Callable[..., str]
) -> None:
    grant("alice", NOTES, "read")
    insert_notes(migrated_engine, NOTES, [("Note", "body")])

    refused = rpc(
        "tools/call", {"name": "notes_reindex", "arguments": {"workspaceUri": NOTES}}, caps={}
    )

    assert refused["error"]["code"] == -32602
    assert refused["error"]["data"] == {"usableWorkspaces": []}  # alice may only read
    assert queued(migrated_engine) == 1  # queued by the insert, not embedded
