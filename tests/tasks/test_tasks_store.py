"""store.tasks: a task's row changes only while it runs, is found only by its principal while
it lives, and expired rows go in bounded batches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from notes_server.store import tasks
from notes_server.store.tasks import SqlTasks
from tests.tasks.conftest import Clock

HOUR = timedelta(hours=1)


@pytest.fixture
def repo(migrated_engine: Engine, clock: Clock) -> SqlTasks:
    return SqlTasks(migrated_engine, clock)


def test_a_new_task_is_found_only_by_its_principal(repo: SqlTasks) -> None:
    created = repo.create("alice", "notes_import", HOUR, "Started")

    assert repo.get("alice", created.id) == created
    assert repo.get("bob", created.id) is None
    assert (created.status, created.cancel_requested) == ("working", False)


def test_two_tasks_never_share_an_id(repo: SqlTasks) -> None:
    ids = {repo.create("alice", "t", HOUR, "Started").id for _ in range(20)}

    assert len(ids) == 20
    assert all(len(i) == 43 for i in ids)


def test_a_finished_task_keeps_its_end(repo: SqlTasks, clock: Clock) -> None:
    task = repo.create("alice", "t", HOUR, "Started")
    clock.advance(timedelta(seconds=5))
    assert repo.progress(task.id, 1, 2, "1 of 2") is True
    assert repo.finish(task.id, tasks.COMPLETED, "Completed", result={"isError": False}) is True

    assert repo.progress(task.id, 2, 2, "2 of 2") is False
    assert repo.finish(task.id, tasks.FAILED, "late", error={"code": -32603}) is False
    assert repo.request_cancel("alice", task.id) is True  # acknowledged, nothing changes
    ended = repo.get("alice", task.id)
    assert ended is not None
    assert (ended.status, ended.status_message, ended.result, ended.error) == (
        "completed",
        "Completed",
        {"isError": False},
        None,
    )
    assert (ended.progress_done, ended.progress_total, ended.cancel_requested) == (1, 2, False)
    assert ended.updated_at == task.created_at + timedelta(seconds=5)


def test_a_cancel_sets_the_flag_of_the_principals_running_task_only(repo: SqlTasks) -> None:
    task = repo.create("alice", "t", HOUR, "Started")

    assert repo.request_cancel("bob", task.id) is False
    assert repo.cancel_requested(task.id) is False
    assert repo.request_cancel("alice", task.id) is True
    assert repo.cancel_requested(task.id) is True


def test_the_sweep_deletes_only_expired_tasks_in_batches(
    repo: SqlTasks, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "SWEEP_BATCH", 3)
    old = [repo.create("alice", "t", timedelta(minutes=1), "Started") for _ in range(7)]
    fresh = repo.create("alice", "t", HOUR, "Started")
    clock.advance(timedelta(minutes=2))

    assert repo.get("alice", old[0].id) is None  # expired: never answered, even before the sweep
    assert repo.sweep() == 7
    assert repo.sweep() == 0
    assert repo.get("alice", fresh.id) == fresh
