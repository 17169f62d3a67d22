"""`sync --watch`: a full reconcile at start, then one after every burst of file changes and
at least every ``interval`` seconds (store-side edits have no file event).

Every round is a full reconcile through the descriptor-safe walker, so the events are only a
trigger: an editor that saves by rename-over (vim, VS Code), a burst of changes coalesced by
the watcher, or a missed event on a filesystem without inotify all end in the same state. The
watcher polls when the folder is on a filesystem inotify does not cover (``poll=True``, or
``WATCHFILES_FORCE_POLLING`` in the environment).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from notes_server.features.folders.summary import Summary
from notes_server.features.folders.sync import sync_folder
from notes_server.features.folders.walker import TEMP_PREFIX
from notes_server.security.uri import WorkspaceUri

if TYPE_CHECKING:
    from sqlalchemy import Engine


TICK_MS = 500


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
    from watchfiles import watch

    rounds = watch(
        folder,
        watch_filter=_relevant,
        step=200,  # a save by rename-over takes well under this: one round sees its end state
        rust_timeout=TICK_MS,
        yield_on_timeout=True,
        stop_event=stop,
        force_polling=True if poll else None,
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


def busy(summary: Summary, shown: list[tuple[str, str, str]]) -> bool:
    """Whether a round did something, or refused something not already reported."""
    if summary.conflicts or summary.problems != shown:
        return True
    return any(n for action, n in summary.counts.items() if action not in ("unchanged", "refused"))
