"""`sync --watch`: a full reconcile at start, then one after every burst of file changes and
at least every ``interval`` seconds (store-side edits have no file event).

Every round is a full reconcile through the descriptor-safe walker, so the events are only a
trigger: an editor that saves by rename-over (vim, VS Code), a burst of changes coalesced by
the watcher, or a missed event on a filesystem without inotify all end in the same state.

On a filesystem inotify does not cover (``poll=True``) the folder is polled here rather than by
watchfiles' poller: that one compares modification times in whole seconds, so a second save in
the same second as the first (VS Code writes a temp file and renames it over the note) went
unseen until the periodic reconcile. Here every entry is compared by inode, size, and
modification and change times in nanoseconds, which a rename-over always changes.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from notes_server.features.folders.summary import Summary
from notes_server.features.folders.sync import sync_folder
from notes_server.features.folders.walker import TEMP_PREFIX
from notes_server.security.uri import WorkspaceUri

if TYPE_CHECKING:
    from sqlalchemy import Engine


TICK_MS = 500
STEP_MS = 200  # a save by rename-over takes well under this: one round sees its end state
POLL_MS = 300  # with poll=True, how often the folder is scanned


class WatchUnavailable(Exception):
    """The optional watcher library is not installed."""


def _relevant(_change: object, path: str) -> bool:
    """Our own temp files are not changes; everything else may be (the walker decides)."""
    return not path.rsplit("/", 1)[-1].startswith(TEMP_PREFIX)


def require_watcher() -> None:
    """Refuse `--watch` before anything else happens when its optional library is missing."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        raise WatchUnavailable(
            "--watch needs the watchfiles package: pip install 'notes-server[watch]'"
        ) from None


def watch_folder(
    engine: Engine,
    root_fd: int,
    workspace: WorkspaceUri,
    folder: str,
    *,
    clock: Callable[[], datetime],
    report: Callable[[Summary], None],
    actor: str,
    interval: float = 30.0,
    poll: bool = False,
    stop: threading.Event | None = None,
) -> None:
    """Reconcile until interrupted or ``stop`` is set; ``report`` gets the first round's
    summary, and later ones when something happened; ``actor`` is named in the audit log."""
    require_watcher()
    rounds: Iterator[set[str]]
    if poll or os.environ.get("WATCHFILES_FORCE_POLLING", "").lower() not in ("", "0", "false"):
        rounds = poll_changes(root_fd, stop or threading.Event())
    else:
        from watchfiles import watch

        rounds = (
            {path for _change, path in changes}
            for changes in watch(
                folder,
                watch_filter=_relevant,
                step=STEP_MS,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                stop_event=stop,
                force_polling=False,
            )
        )
    # The first round runs once the watcher exists (its first yield), so nothing changed
    # between the start-up reconcile and the first event can be missed.
    last: float | None = None
    shown: list[tuple[str, str, str]] = []
    for changes in rounds:
        now = time.monotonic()
        if changes or last is None or now - last >= interval:
            summary = sync_folder(engine, root_fd, workspace, folder, clock(), actor=actor)
            if last is None or busy(summary, shown):
                report(summary)
            last, shown = now, summary.problems


Signature = tuple[int, int, int, int, int]


def _scan(root_fd: int) -> dict[str, Signature]:
    """Every entry under the folder (not following links, our temp files left out) -> what a
    change to it changes: inode, type, size, modification and change times in nanoseconds."""
    seen: dict[str, Signature] = {}
    for top, dirs, files, dir_fd in os.fwalk(".", dir_fd=root_fd):
        for name in (*dirs, *files):
            if name.startswith(TEMP_PREFIX):
                continue
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:  # gone since it was listed: the next scan says so
                continue
            mode = stat.S_IFMT(st.st_mode)
            seen[f"{top}/{name}"] = (st.st_ino, mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return seen


def poll_changes(root_fd: int, stop: threading.Event) -> Iterator[set[str]]:
    """Scan every POLL_MS; yield the changed paths once a scan STEP_MS later finds nothing
    further (a burst is one round), and an empty set at least every TICK_MS otherwise, until
    ``stop`` is set. The first yield comes after the first scan."""
    before = _scan(root_fd)
    yield set()
    quiet_since = time.monotonic()
    pending: set[str] = set()
    while not stop.wait((STEP_MS if pending else POLL_MS) / 1000):
        now = _scan(root_fd)
        changed = {p for p in before.keys() | now.keys() if before.get(p) != now.get(p)}
        before = now
        if changed:
            pending |= changed
        elif pending or time.monotonic() - quiet_since >= TICK_MS / 1000:
            yield pending
            pending, quiet_since = set(), time.monotonic()


def busy(summary: Summary, shown: list[tuple[str, str, str]]) -> bool:
    """Whether a round did something, or refused something not already reported."""
    if summary.conflicts or summary.problems != shown:
        return True
    return any(n for action, n in summary.counts.items() if action not in ("unchanged", "refused"))
