"""`notifications/tasks` on `subscriptions/listen` (`notifications.taskIds`): a listen that asks
for its principal's tasks is sent each one's DetailedTask (what `tasks/get` would answer) once
after the acknowledgement, then whenever its status or its outstanding input requests change,
until it ends (the terminal state is the last one sent for it).

One watcher thread per runner while any listen watches a task: it reads the watched rows in
one query when this process committed a write (`write_signal`, so a local status change is
sent at once) and otherwise every POLL_S (a change made by another instance). Authorized on
delivery: a row is sent only to a listen of the principal that created the task, read from
the row at that moment; an id that is not the principal's live task is never acknowledged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from notes_server.errors import InvalidParams
from notes_server.jsontext import dump_text

if TYPE_CHECKING:
    from notes_server.features.tasks.runner import TaskRunner
    from notes_server.store.tasks import TaskRecord

LOG = logging.getLogger("notes_server.tasks")

METHOD = "notifications/tasks"
MAX_TASK_IDS = 100
MAX_TASK_ID_CHARS = 256
POLL_S = 1.0


class Listener(Protocol):
    """What the watcher needs of an open listen (`subscriptions.hub.Listen`)."""

    principal: str
    closed: bool
    dropped: bool

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes: ...

    def offer(self, messages: Sequence[bytes]) -> None: ...


def read_task_ids(raw: object) -> tuple[str, ...]:
    """`notifications.taskIds`, checked (-32602); duplicates once, order kept."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidParams("Invalid params: notifications.taskIds must be a list")
    if len(raw) > MAX_TASK_IDS:
        raise InvalidParams(
            f"Too many task subscriptions: at most {MAX_TASK_IDS} task ids per listen",
            {"limit": MAX_TASK_IDS, "requested": len(raw)},
        )
    if not all(isinstance(t, str) and 0 < len(t) <= MAX_TASK_ID_CHARS for t in raw):
        raise InvalidParams("Invalid params: notifications.taskIds must be non-empty strings")
    return tuple(dict.fromkeys(raw))


def _fingerprint(record: TaskRecord) -> str:
    return record.status + dump_text(record.input_requests or {})


class TaskWatch:
    """The listens watching tasks of one runner's engine."""

    def __init__(self, runner: TaskRunner) -> None:
        self.runner = runner
        self._lock = threading.Lock()
        # listen -> {task id: the fingerprint last sent}
        self._watches: dict[Listener, dict[str, str]] = {}
        self._thread: threading.Thread | None = None
        self._delivering = threading.Lock()  # one delivery at a time: nothing sent twice

    def accept(self, principal: str, task_ids: Sequence[str]) -> tuple[str, ...]:
        """The ids that are the principal's live tasks (what the acknowledgement names)."""
        if not task_ids:
            return ()
        mine = {r.id for r in self.runner.repo.get_many(task_ids) if r.principal == principal}
        return tuple(t for t in task_ids if t in mine)

    def watch(self, listen: Listener, task_ids: Sequence[str]) -> None:
        """Send each task's state now, then its changes (call after the acknowledgement)."""
        if not task_ids:
            return
        with self._lock:
            self._watches[listen] = {task_id: "" for task_id in task_ids}
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="task watch")
                self._thread.start()
        self.deliver()

    def watching(self) -> int:
        with self._lock:
            return len(self._watches)

    def deliver(self) -> None:
        """One read of every watched row; what changed goes to its principal's listens."""
        with self._delivering:
            self._deliver()

    def _deliver(self) -> None:
        from notes_server.features.tasks.runner import task_wire
        from notes_server.store import tasks

        with self._lock:
            for listen in [w for w in self._watches if w.closed or w.dropped]:
                del self._watches[listen]
            watches = {listen: dict(sent) for listen, sent in self._watches.items()}
        wanted = {task_id for sent in watches.values() for task_id in sent}
        if not wanted:
            return
        rows = {r.id: r for r in self.runner.repo.get_many(wanted)}
        for listen, sent in watches.items():
            messages = []
            for task_id, last in sent.items():
                record = rows.get(task_id)
                if record is None or record.principal != listen.principal:
                    sent[task_id] = "gone"  # expired (or never its own): nothing more
                    continue
                now = _fingerprint(record)
                if now != last:
                    sent[task_id] = now
                    messages.append(listen.notification(METHOD, task_wire(record)))
                if record.status in tasks.TERMINAL:
                    sent[task_id] = "gone"
            listen.offer(messages)
            left = {t: f for t, f in sent.items() if f != "gone"}
            with self._lock:
                if listen not in self._watches:
                    continue
                if left:
                    self._watches[listen] = left
                else:
                    del self._watches[listen]

    def _run(self) -> None:
        from notes_server.store.engine import write_signal

        signal = write_signal(self.runner.services.engine, "tasks")
        while True:
            signal.wait(POLL_S)
            signal.clear()
            with self._lock:
                if not self._watches:
                    self._thread = None
                    return
            try:
                self.deliver()
            except Exception:  # a failed read is retried at the next tick
                LOG.warning("task notifications not read", exc_info=True)
