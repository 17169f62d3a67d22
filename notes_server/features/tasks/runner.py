"""Running a tool call as a task: a row in the database, the work on a worker thread.

The row is committed before the client hears of the task, and everything a client can ask
(`tasks/get`, `tasks/cancel`) goes through it, so any worker or instance answers. The work runs
on a thread of this process (not a daemon: a stdio server whose client went away finishes its
tasks before it exits, an HTTP worker does not depend on the request that started them).
Cancellation is cooperative: `tasks/cancel` sets the row's flag (and, in the process running
the task, its event at once); the work looks at it between units of work (the import: between
files), commits what it did and returns, and the task ends `cancelled` with what was committed.
Input is durable too: a task that asks (`Control.request_input`) is `input_required` with its
requests in the row; `tasks/update` at any instance stores the answers there; the work reads
them from the row (woken at once when the answer reached this process).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from notes_server.capabilities import TASKS_EXTENSION, declares_tasks
from notes_server.errors import (
    INTERNAL_ERROR,
    McpError,
    MissingCapability,
    ToolFailure,
    to_wire,
)
from notes_server.jsontext import dump_text
from notes_server.tools.base import (
    CallContext,
    InputAbandoned,
    InputRequired,
    TaskWork,
    Tool,
    ToolResult,
)
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from notes_server.store.tasks import SqlTasks, TaskRecord

LOG = logging.getLogger("notes_server.tasks")

DEFAULT_TTL = timedelta(hours=1)
POLL_INTERVAL_MS = 1000
# Tasks running at once in one process (2 cores shared by the HTTP workers); past it a call
# runs as an ordinary call, which the extension allows: the server decides per request.
MAX_RUNNING = 4
# Tasks waiting for input (a blocked thread each, no work) do not count against MAX_RUNNING;
# at most this many more threads wait at once in one process.
MAX_WAITING = 64
# A running task writes its progress at most this often, and looks at the database's
# cancellation flag (set by another instance) at most this often.
PROGRESS_EVERY_S = 0.25
CANCEL_CHECK_EVERY_S = 0.25
# A task waiting for input reads its row this often (an answer at another instance).
INPUT_CHECK_EVERY_S = 1.0
WAITING = "Waiting for input"
ABANDONED = "Cancelled while waiting for input; nothing was done after the question"
SWEEP_EVERY_S = 60.0
# A running task's process touches its row this often; a task silent for ORPHAN_AFTER (its
# process killed, crashed or gone) ends `failed` at the next `tasks/get`, from any instance.
BEAT_EVERY_S = 10.0
ORPHAN_AFTER = timedelta(seconds=60)
ORPHANED = (
    "The server process running this task stopped before the task ended; what it committed "
    "before then stays committed"
)


def missing_extension() -> MissingCapability:
    """-32021 naming the extension, as the extension words it."""
    return MissingCapability(
        "Missing required client capability: the io.modelcontextprotocol/tasks extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_wire(record: TaskRecord) -> dict[str, Any]:
    """The extension's DetailedTask for a record (without `resultType`)."""
    from notes_server.store import tasks

    ttl = record.expires_at - record.created_at
    body: dict[str, Any] = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": iso(record.created_at),
        "lastUpdatedAt": iso(record.updated_at),
        "ttlMs": int(ttl.total_seconds() * 1000),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if record.status_message is not None:
        body["statusMessage"] = record.status_message
    if record.status == tasks.COMPLETED:
        body["result"] = record.result if record.result is not None else {}
    elif record.status == tasks.FAILED:
        body["error"] = record.error if record.error is not None else to_wire(RuntimeError())
    elif record.status == tasks.INPUT_REQUIRED:
        body["inputRequests"] = record.input_requests or {}
    return body


class Control:
    """A running task's TaskControl: progress into its row (rate-limited), cancellation from
    its event or, now and then, its row. `observed` records that the work saw the request."""

    def __init__(
        self,
        repo: SqlTasks,
        task_id: str,
        event: threading.Event,
        answered: threading.Event | None = None,
    ) -> None:
        self.repo = repo
        self.task_id = task_id
        self.event = event
        self.answered = answered or threading.Event()
        self.waiting = False
        self._asking = threading.Condition()  # notified when a round is asked
        self._asked_round = 0  # the round the row asks now; 0 when it asks nothing
        self.observed = False
        self.abandoned = False
        self._reported = 0.0
        self._checked = time.monotonic()
        self._issued: set[str] = set()
        self._rounds = 0

    def request_input(self, requests: dict[str, Any]) -> dict[str, Any]:
        """`input_required` with `requests` until the row holds every answer. Keys are unique
        over the task's life (the extension's rule): a key asked again in a later round goes
        out as `<key>.<round>` and its answer comes back under the tool's own key."""
        self._rounds += 1
        wire = {}
        for key, request in requests.items():
            sent = key if key not in self._issued else f"{key}.{self._rounds}"
            self._issued.add(sent)
            wire[sent] = (key, request)
        self.answered.clear()
        if not self.repo.request_input(self.task_id, {k: r for k, (_, r) in wire.items()}, WAITING):
            raise InputAbandoned("the task is no longer running")
        self.waiting = True
        with self._asking:
            self._asked_round = self._rounds
            self._asking.notify_all()
        try:
            while True:
                answers, over = self.repo.answers(self.task_id)
                if answers is not None:
                    return {wire[k][0]: v for k, v in answers.items() if k in wire}
                if over or self.event.is_set():
                    self.abandoned = True
                    raise InputAbandoned("the task was cancelled or expired waiting for input")
                self.answered.wait(INPUT_CHECK_EVERY_S)
                self.answered.clear()
        finally:
            with self._asking:
                self._asked_round = 0
            self.waiting = False

    def wait_asked(self, round_no: int, timeout: float | None) -> bool:
        """Wait until the task asks its `round_no`-th question (tests)."""
        with self._asking:
            return self._asking.wait_for(lambda: self._asked_round >= round_no, timeout)

    def report(self, done: float, total: float | None = None, message: str | None = None) -> None:
        now = time.monotonic()
        last = total is not None and done >= total
        if not last and done and now - self._reported < PROGRESS_EVERY_S:
            return
        self._reported = now
        try:
            self.repo.progress(
                self.task_id, int(done), None if total is None else int(total), message
            )
        except Exception:  # progress never fails the work
            LOG.warning("task progress not recorded", exc_info=True)

    def is_set(self) -> bool:
        if not self.event.is_set():
            now = time.monotonic()
            if now - self._checked >= CANCEL_CHECK_EVERY_S:
                self._checked = now
                try:
                    if self.repo.cancel_requested(self.task_id):
                        self.event.set()
                except Exception:
                    LOG.warning("task cancellation flag not read", exc_info=True)
        if self.event.is_set():
            self.observed = True
            return True
        return False


class TaskRunner:
    """Creates, runs and answers for the tasks of one server process."""

    def __init__(
        self, services: Services, ttl: timedelta = DEFAULT_TTL, max_running: int = MAX_RUNNING
    ) -> None:
        self.services = services
        self.ttl = ttl
        self.max_running = max_running
        self._repo: SqlTasks | None = None
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}
        self._answered: dict[str, threading.Event] = {}
        self._controls: dict[str, Control] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._swept = 0.0
        self._beating: threading.Thread | None = None

    @property
    def repo(self) -> SqlTasks:
        if self._repo is None:  # SQLAlchemy loads with the first task, not at start
            from notes_server.store.tasks import SqlTasks

            self._repo = SqlTasks(self.services.engine, self.services.clock)
        return self._repo

    def maybe_start(
        self, tool: Tool, ctx: CallContext, arguments: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The `tools/call` hook: a CreateTaskResult when the request declares the extension,
        the tool may run as a task and this process has room (a tool that requires tasks
        always gets one); else None (an ordinary call), or -32021 for a tool that requires
        tasks called without the extension."""
        if tool.task_support == "forbidden":
            return None
        if not declares_tasks(ctx.capabilities):
            if tool.task_support == "required":
                raise missing_extension()
            return None
        if not self._has_room() and tool.task_support != "required":
            return None  # past the bound an optional call runs as an ordinary call
        # The request is answered before the work ends: nothing of the work may go to its
        # stream (the extension has no progress or log messages for tasks; the row has them).
        ctx = ctx._replace(progress=None, log=None)
        work = tool.start_task(ctx, arguments)  # refusals answer the call itself, at once
        if isinstance(work, InputRequired):  # a round before the task: the call's answer
            return work.to_wire()
        self._sweep_now_and_then()
        record = self.repo.create(ctx.principal, tool.name, self.ttl, "Started")
        event, answered = threading.Event(), threading.Event()
        control = Control(self.repo, record.id, event, answered)
        thread = threading.Thread(
            target=self._run, args=(record.id, work, control), name=f"task {tool.name}"
        )
        with self._lock:
            self._running[record.id] = event
            self._answered[record.id] = answered
            self._controls[record.id] = control
            self._threads[record.id] = thread
            if self._beating is None:
                self._beating = threading.Thread(target=self._beat_while_running, daemon=True)
                self._beating.start()
        thread.start()
        return {"resultType": "task", **task_wire(record)}

    def _has_room(self) -> bool:
        """Fewer than max_running tasks working (not waiting for input) and fewer than
        MAX_WAITING more threads in all."""
        with self._lock:
            waiting = sum(1 for control in self._controls.values() if control.waiting)
            total = len(self._running)
        return total - waiting < self.max_running and total < self.max_running + MAX_WAITING

    def get(self, principal: str, task_id: str) -> TaskRecord | None:
        """The principal's live task; a running one whose process has been silent for
        ORPHAN_AFTER is ended `failed` first (never one this process runs)."""
        from notes_server.store import tasks

        record = self.repo.get(principal, task_id)
        if record is None or record.status not in tasks.RUNNING:
            return record
        silent_since = self.services.clock() - ORPHAN_AFTER
        with self._lock:
            ours = task_id in self._running
        if ours or record.heard_at >= silent_since:
            return record
        error = {"code": INTERNAL_ERROR, "message": "Internal error: " + ORPHANED.lower()}
        if self.repo.end_if_silent(task_id, silent_since, ORPHANED, error):
            LOG.warning("task %s: its process stopped; ended failed", task_id[:8])
        return self.repo.get(principal, task_id)

    def beat(self) -> int:
        """Say that this process is alive for each task it runs; how many rows said so."""
        with self._lock:
            running = list(self._running)
        return self.repo.beat(running)

    def _beat_while_running(self) -> None:
        """The heartbeat thread: a beat every BEAT_EVERY_S while this process runs a task."""
        pause = threading.Event()
        while True:
            pause.wait(BEAT_EVERY_S)
            with self._lock:
                if not self._running:
                    self._beating = None
                    return
            try:
                self.beat()
            except Exception:  # a missed beat only brings the orphan window nearer
                LOG.warning("task heartbeat not recorded", exc_info=True)

    def cancel(self, principal: str, task_id: str) -> bool:
        """Request cancellation; False when the principal has no such live task. A task this
        process runs sees its event at once (and stops after the file it is writing, which
        releases SQLite's write lock); the row's flag tells any other instance."""
        if self.repo.get(principal, task_id) is None:
            return False
        with self._lock:
            event = self._running.get(task_id)
        if event is not None:
            event.set()
        return self.repo.request_cancel(principal, task_id)

    def answer(self, principal: str, task_id: str, responses: dict[str, Any]) -> bool:
        """`tasks/update`: store the answers (`SqlTasks.answer`); False when the principal has
        no such live task. A task this process runs is woken at once; another instance's reads
        the row within INPUT_CHECK_EVERY_S."""
        if self.get(principal, task_id) is None:
            return False
        if not self.repo.answer(principal, task_id, responses):
            return False
        with self._lock:
            answered = self._answered.get(task_id)
        if answered is not None:
            answered.set()
        return True

    def wait_for_input(self, task_id: str, timeout: float | None = None, round_no: int = 1) -> bool:
        """Wait until a task this process runs asks its `round_no`-th question (tests); True
        once it does."""
        with self._lock:
            control = self._controls.get(task_id)
        return control is not None and control.wait_asked(round_no, timeout)

    def join(self, task_id: str, timeout: float | None = None) -> bool:
        """Wait for a task this process runs to end (tests, shutdown); True once it has."""
        with self._lock:
            thread = self._threads.get(task_id)
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def join_all(self, timeout: float) -> None:
        """Wait for every task this process runs (tests, an orderly shutdown)."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)

    def _sweep_now_and_then(self) -> None:
        now = time.monotonic()
        if self._swept and now - self._swept < SWEEP_EVERY_S:
            return
        self._swept = now
        try:
            removed = self.repo.sweep()
        except Exception:
            LOG.warning("expired tasks not swept", exc_info=True)
            return
        if removed:
            LOG.info("swept %d expired tasks", removed)

    def _run(self, task_id: str, work: TaskWork, control: Control) -> None:
        from notes_server.store import tasks

        try:
            try:
                outcome = work(control)
            except InputAbandoned:
                if control.abandoned:
                    self.repo.finish(task_id, tasks.CANCELLED, ABANDONED)
                return
            except ToolFailure as failure:
                outcome = ToolResult(failure.structured, failure.message, is_error=True)
            except McpError as exc:
                self.repo.finish(task_id, tasks.FAILED, exc.message, error=to_wire(exc))
                return
            except Exception as exc:
                LOG.exception("task %s failed", task_id[:8])
                error = to_wire(exc)
                self.repo.finish(task_id, tasks.FAILED, error["message"], error=error)
                return
            if control.observed:
                committed = outcome.structured if outcome.structured is not None else {}
                message = "Cancelled; committed before stopping: " + dump_text(committed)
                self.repo.finish(task_id, tasks.CANCELLED, message, result=outcome.to_wire())
            else:
                self.repo.finish(task_id, tasks.COMPLETED, "Completed", result=outcome.to_wire())
        except Exception:
            LOG.exception("task %s: its end was not recorded", task_id[:8])
        finally:
            with self._lock:
                self._running.pop(task_id, None)
                self._answered.pop(task_id, None)
                self._controls.pop(task_id, None)
                self._threads.pop(task_id, None)
