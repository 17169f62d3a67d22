"""Durable tasks (the `io.modelcontextprotocol/tasks` extension), shared by every worker and
instance through the database.

Every lookup is scoped to the principal that created the task and to rows not yet expired, so
another principal's id, an unknown id and an expired one are the same "not found". One short
transaction per call, through SQLAlchemy Core (the same statements on SQLite and PostgreSQL:
tasks are polled every few seconds, not a hot path). A finished task keeps its status: the
terminal update only applies to a task still running, so a late progress report or a second
finish never rewrites it. Expired rows are deleted in bounded batches (`sweep`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select, update

from notes_server.jsontext import dump_text
from notes_server.store.engine import read_tx, retrying, write_tx
from notes_server.store.models import tasks_table as tasks

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = (COMPLETED, FAILED, CANCELLED)
RUNNING = (WORKING, INPUT_REQUIRED)
SWEEP_BATCH = 200
SWEEP_BATCHES = 10
# 32 random bytes, URL-safe: a task id is a bearer handle to the task's stored state.
ID_BYTES = 32


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    principal: str
    tool: str
    status: str
    status_message: str | None
    progress_done: int | None
    progress_total: int | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    # When its process last said it was alive (SqlTasks.beat); None on rows older than that.
    alive_at: datetime | None = None
    # While `input_required`: the outstanding requests by key; and the answers by key that
    # `tasks/update` delivered and the task has not taken yet (`SqlTasks.answers`).
    input_requests: dict[str, Any] | None = None
    input_responses: dict[str, Any] | None = None

    @property
    def heard_at(self) -> datetime:
        """The last sign of life of the process running it."""
        return self.updated_at if self.alive_at is None else max(self.alive_at, self.updated_at)


_COLUMNS = (
    tasks.c.id,
    tasks.c.principal,
    tasks.c.tool,
    tasks.c.status,
    tasks.c.status_message,
    tasks.c.progress_done,
    tasks.c.progress_total,
    tasks.c.result_json,
    tasks.c.error_json,
    tasks.c.cancel_requested,
    tasks.c.created_at,
    tasks.c.updated_at,
    tasks.c.expires_at,
    tasks.c.alive_at,
    tasks.c.input_requests_json,
    tasks.c.input_responses_json,
)


def _record(row: Any) -> TaskRecord:
    return TaskRecord(
        row.id,
        row.principal,
        row.tool,
        row.status,
        row.status_message,
        row.progress_done,
        row.progress_total,
        None if row.result_json is None else json.loads(row.result_json),
        None if row.error_json is None else json.loads(row.error_json),
        bool(row.cancel_requested),
        row.created_at,
        row.updated_at,
        row.expires_at,
        row.alive_at,
        _loads(row.input_requests_json),
        _loads(row.input_responses_json),
    )


def _loads(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text)


def new_task_id() -> str:
    return secrets.token_urlsafe(ID_BYTES)


class SqlTasks:
    """The task repository on one engine; `clock` gives aware UTC."""

    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self.engine = engine
        self.clock = clock

    def create(self, principal: str, tool: str, ttl: timedelta, message: str) -> TaskRecord:
        """A new working task, committed before this returns (the extension requires that a
        `tasks/get` for the id resolves as soon as the client has it)."""
        now = self.clock()
        expires = now + ttl
        task_id = new_task_id()
        row: dict[str, Any] = {
            "id": task_id,
            "principal": principal,
            "tool": tool,
            "status": WORKING,
            "status_message": message,
            "progress_done": None,
            "progress_total": None,
            "result_json": None,
            "error_json": None,
            "cancel_requested": False,
            "created_at": now,
            "updated_at": now,
            "expires_at": expires,
            "alive_at": now,
        }

        def body() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(insert(tasks).values(**row))

        retrying(body)
        return TaskRecord(
            task_id, principal, tool, WORKING, message, None, None, None, None, False,
            now, now, expires, now,
        )  # fmt: skip

    def get(self, principal: str, task_id: str) -> TaskRecord | None:
        """The principal's live task, or None (unknown, another principal's, or expired)."""
        with read_tx(self.engine) as conn:
            row = conn.execute(
                select(*_COLUMNS).where(
                    tasks.c.id == task_id,
                    tasks.c.principal == principal,
                    tasks.c.expires_at > self.clock(),
                )
            ).first()
        return None if row is None else _record(row)

    def get_many(self, task_ids: Collection[str]) -> list[TaskRecord]:
        """The live (not expired) tasks among these ids, whoever created them: the caller
        checks each one's principal (the listen stream authorizes on delivery)."""
        if not task_ids:
            return []
        with read_tx(self.engine) as conn:
            rows = conn.execute(
                select(*_COLUMNS).where(
                    tasks.c.id.in_(list(task_ids)), tasks.c.expires_at > self.clock()
                )
            ).all()
        return [_record(row) for row in rows]

    def progress(self, task_id: str, done: int, total: int | None, message: str | None) -> bool:
        """Record progress of a running task; False once it is no longer running."""
        return self._update_running(
            task_id, progress_done=done, progress_total=total, status_message=message
        )

    def finish(
        self,
        task_id: str,
        status: str,
        message: str | None,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Move a running task to a terminal status, once; False if it had already ended."""
        assert status in TERMINAL
        return self._update_running(
            task_id,
            status=status,
            status_message=message,
            result_json=None if result is None else dump_text(result),
            error_json=None if error is None else dump_text(error),
        )

    def beat(self, task_ids: Collection[str]) -> int:
        """Say that these tasks' process is alive (those still running); how many."""
        if not task_ids:
            return 0

        def body() -> int:
            with write_tx(self.engine) as conn:
                done = conn.execute(
                    update(tasks)
                    .where(tasks.c.id.in_(list(task_ids)), tasks.c.status.in_(RUNNING))
                    .values(alive_at=self.clock())
                )
                return int(done.rowcount)

        return retrying(body)

    def end_if_silent(
        self, task_id: str, silent_since: datetime, message: str, error: dict[str, Any]
    ) -> bool:
        """Fail a running task whose process has not said it was alive since `silent_since`
        (nor progressed); False when it has, or has ended. One conditional update, so two
        instances deciding at once fail it once, and a late beat wins over a stale read."""
        heard = func.coalesce(tasks.c.alive_at, tasks.c.updated_at)

        def body() -> bool:
            with write_tx(self.engine) as conn:
                done = conn.execute(
                    update(tasks)
                    .where(
                        tasks.c.id == task_id,
                        tasks.c.status.in_(RUNNING),
                        heard < silent_since,
                        tasks.c.updated_at < silent_since,
                    )
                    .values(
                        status=FAILED,
                        status_message=message,
                        error_json=dump_text(error),
                        updated_at=self.clock(),
                    )
                )
                return bool(done.rowcount)

        return retrying(body)

    def request_cancel(self, principal: str, task_id: str) -> bool:
        """Set the cancellation flag of the principal's live task; False when there is no such
        task. A task that has already ended is acknowledged and left as it is."""

        def body() -> bool:
            now = self.clock()
            with write_tx(self.engine) as conn:
                found = conn.execute(
                    select(tasks.c.status).where(
                        tasks.c.id == task_id,
                        tasks.c.principal == principal,
                        tasks.c.expires_at > now,
                    )
                ).first()
                if found is None:
                    return False
                if found.status in RUNNING:
                    conn.execute(
                        update(tasks)
                        .where(tasks.c.id == task_id)
                        .values(cancel_requested=True, updated_at=now)
                    )
                return True

        return retrying(body)

    def request_input(self, task_id: str, requests: dict[str, Any], message: str) -> bool:
        """A running task needs the client's input: `input_required` with these outstanding
        requests (answers of an earlier round cleared); False once it is no longer running."""
        return self._update_running(
            task_id,
            status=INPUT_REQUIRED,
            status_message=message,
            input_requests_json=dump_text(requests),
            input_responses_json=None,
        )

    def answer(self, principal: str, task_id: str, responses: dict[str, Any]) -> bool:
        """`tasks/update`: keep the responses to keys outstanding now (others are ignored, as
        the extension asks), drop those keys from the outstanding requests and, once none is
        left, put the task back to `working` for its process to take the answers. False when
        the principal has no such live task; a task not waiting for input is left as it is.
        One transaction with the row locked, so two instances answering at once both count."""

        def body() -> bool:
            now = self.clock()
            with write_tx(self.engine) as conn:
                found = conn.execute(
                    select(
                        tasks.c.status, tasks.c.input_requests_json, tasks.c.input_responses_json
                    )
                    .where(
                        tasks.c.id == task_id,
                        tasks.c.principal == principal,
                        tasks.c.expires_at > now,
                    )
                    .with_for_update()
                ).first()
                if found is None:
                    return False
                outstanding = _loads(found.input_requests_json) or {}
                taken = {k: v for k, v in responses.items() if k in outstanding}
                if found.status != INPUT_REQUIRED or not taken:
                    return True
                left = {k: v for k, v in outstanding.items() if k not in taken}
                answered = {**(_loads(found.input_responses_json) or {}), **taken}
                conn.execute(
                    update(tasks)
                    .where(tasks.c.id == task_id)
                    .values(
                        status=INPUT_REQUIRED if left else WORKING,
                        status_message="Waiting for input" if left else "Input received",
                        input_requests_json=dump_text(left) if left else None,
                        input_responses_json=dump_text(answered),
                        updated_at=now,
                    )
                )
                return True

        return retrying(body)

    def answers(self, task_id: str) -> tuple[dict[str, Any] | None, bool]:
        """(every answer, once none is outstanding, else None; whether the wait is over
        without them: `tasks/cancel` reached the task, or it expired): what a task waiting for
        input looks at. One read, no write."""
        with read_tx(self.engine) as conn:
            row = conn.execute(
                select(
                    tasks.c.status,
                    tasks.c.input_requests_json,
                    tasks.c.input_responses_json,
                    tasks.c.cancel_requested,
                    tasks.c.expires_at,
                ).where(tasks.c.id == task_id)
            ).first()
        if row is None or row.expires_at <= self.clock():  # gone: nobody can answer any more
            return None, True
        complete = row.status == WORKING and row.input_requests_json is None
        return (_loads(row.input_responses_json) if complete else None), bool(row.cancel_requested)

    def cancel_requested(self, task_id: str) -> bool:
        """Whether `tasks/cancel` reached this task (from any worker or instance)."""
        with read_tx(self.engine) as conn:
            flag = conn.execute(
                select(tasks.c.cancel_requested).where(tasks.c.id == task_id)
            ).scalar()
        return bool(flag)

    def sweep(self) -> int:
        """Delete expired tasks in bounded batches; how many went."""
        removed = 0
        for _ in range(SWEEP_BATCHES):
            batch = retrying(self._sweep_batch)
            removed += batch
            if batch < SWEEP_BATCH:
                break
        return removed

    def _sweep_batch(self) -> int:
        now = self.clock()
        with write_tx(self.engine) as conn:
            ids = (
                conn.execute(select(tasks.c.id).where(tasks.c.expires_at <= now).limit(SWEEP_BATCH))
                .scalars()
                .all()
            )
            if ids:
                conn.execute(delete(tasks).where(tasks.c.id.in_(ids)))
            return len(ids)

    def _update_running(self, task_id: str, **values: Any) -> bool:
        def body() -> bool:
            with write_tx(self.engine) as conn:
                done = conn.execute(
                    update(tasks)
                    .where(tasks.c.id == task_id, tasks.c.status.in_(RUNNING))
                    .values(updated_at=self.clock(), **values)
                )
                return bool(done.rowcount)

        return retrying(body)
