"""`notes-server import / export / sync`: a workspace mirrored to a plain markdown folder."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from notes_server.cli.errors import StartupFailure
from notes_server.errors import UriError

if TYPE_CHECKING:
    from notes_server.features.folders.progress import Progress
    from notes_server.features.folders.summary import Summary
    from notes_server.security.uri import WorkspaceUri

DB_HELP = "Database URL (default: $NOTES_SERVER_DB, else the embedded SQLite file)."


def _common(func: Any) -> Any:
    func = click.option(
        "--sandbox",
        type=click.Choice(["auto", "require", "off"]),
        default="auto",
        show_default=True,
        help="Confine with Landlock and seccomp: reads only of DIRECTORY, the database and "
        "Python's own files; writes only to the database and (export, sync) beneath DIRECTORY. "
        "`require` refuses to run without it.",
    )(func)
    func = click.option("--db", default=None, metavar="URL", help=DB_HELP)(func)
    func = click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")(func)
    return click.option(
        "--workspace", "workspace_uri", required=True, metavar="URI", help="Workspace file:/// URI."
    )(func)


def _workspace(text: str) -> WorkspaceUri:
    from notes_server.security.uri import parse_workspace_uri

    try:
        return parse_workspace_uri(text)
    except UriError as exc:
        raise click.BadParameter(
            f"not an acceptable workspace URI ({exc})", param_hint="--workspace"
        ) from None


@contextlib.contextmanager
def _folder(directory: str, *, create: bool) -> Iterator[int]:
    from notes_server.features.folders.walker import FolderError, open_root

    try:
        fd = open_root(directory, create=create)
    except FolderError as exc:
        raise StartupFailure(str(exc)) from None
    try:
        yield fd
    finally:
        os.close(fd)


class _Bar:
    """The terminal's progress bar (stderr): files done of the total, ETA, bytes and rate."""

    def __init__(self, label: str, stack: contextlib.ExitStack) -> None:
        self.label, self.stack = label, stack
        self.bar: Any = None
        self.bytes = 0
        self.files = 0
        self.began = time.monotonic()

    def start(self, total: int) -> None:
        self.bar = self.stack.enter_context(
            click.progressbar(
                length=total,
                label=self.label,
                file=sys.stderr,
                show_pos=True,
                show_eta=True,
                item_show_func=lambda shown: shown,
                update_min_steps=max(1, total // 500),  # redrawing per file cost more than it
            )
        )

    def advance(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.files += 1
        rate = self.files / max(time.monotonic() - self.began, 1e-6)
        if self.bar is not None:
            self.bar.update(1, f"{self.bytes / 1e6:.1f} MB, {rate:.0f} files/s")


@contextlib.contextmanager
def _progress(label: str, as_json: bool) -> Iterator[Progress | None]:
    """A bar when stderr is a terminal and a person reads the summary; else nothing."""
    if as_json or not sys.stderr.isatty():
        yield None
        return
    with contextlib.ExitStack() as stack:
        yield _Bar(label, stack)


def _confine(
    mode: str, db: str | None, writable: tuple[str, ...] = (), readable: tuple[str, ...] = ()
) -> None:
    """Confine this process once the folder and the database are open: the kernel then
    refuses any write but the database's and (export, sync) those beneath the folder, and any
    read but the folder's (import: read only), the database's and the interpreter's own."""
    from pathlib import Path

    from notes_server.config import build_settings
    from notes_server.security.sandbox import SandboxUnavailable, confine, policy_for_folder
    from notes_server.store.sqlite_file import hold_open_in_wal

    settings = build_settings(db=db)
    folders = tuple(Path(os.path.realpath(path)) for path in writable)
    reads = tuple(Path(os.path.realpath(path)) for path in readable)
    try:
        policy = policy_for_folder(settings.sqlite_path, folders, reads=reads)
        confine(mode, policy, hold_database=hold_open_in_wal)
    except SandboxUnavailable as exc:
        raise StartupFailure(f"--sandbox require: {exc}") from None


@contextlib.contextmanager
def _stop_on_ctrl_c() -> Iterator[threading.Event]:
    """Ctrl-C asks the command to stop after the current file (the loops look at the event and
    commit what they did); a second Ctrl-C interrupts at once, as usual."""
    stop = threading.Event()

    def ask(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        click.echo("stopping after the current file (Ctrl-C again aborts it)", err=True)

    previous = signal.signal(signal.SIGINT, ask)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _report(
    summary: Summary, as_json: bool, *, dry_run: bool = False, finished: bool = True
) -> None:
    """Print the summary; an interrupted command then exits 130 (what was committed is in the
    summary; running it again finishes the job)."""
    if as_json:
        click.echo(json.dumps(summary.as_json(dry_run=dry_run), ensure_ascii=False))
    else:
        for line in summary.lines(dry_run=dry_run):
            click.echo(line)
    if summary.interrupted and finished:
        raise SystemExit(130)


@click.command(
    name="import",
    epilog="Example: notes-server import ~/Notes --workspace file:///home/alice/notes",
)
@click.argument("directory", type=click.Path(file_okay=False))
@_common
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option(
    "--on-conflict",
    type=click.Choice(["skip", "overwrite", "rename"]),
    default="skip",
    show_default=True,
    help="When a different note already has the file's path.",
)
def import_(
    directory: str,
    workspace_uri: str,
    db: str | None,
    as_json: bool,
    dry_run: bool,
    on_conflict: str,
    sandbox: str,
) -> None:
    """Import *.md, *.markdown and *.txt under DIRECTORY as notes (idempotent)."""
    from notes_server.cli.database import open_database
    from notes_server.features.folders.importer import ImportOptions, import_folder

    workspace = _workspace(workspace_uri)
    from notes_server.config import build_settings

    actor = build_settings(db=db).principal
    options = ImportOptions(policy=on_conflict, dry_run=dry_run, principal=actor)
    with (
        _folder(directory, create=False) as fd,
        open_database(db) as engine,
        _progress("importing", as_json) as progress,
        _stop_on_ctrl_c() as stop,
    ):
        _confine(sandbox, db, readable=(directory,))
        summary = import_folder(engine, fd, workspace, options, progress, stop)
    _report(summary, as_json, dry_run=dry_run)


@click.command(epilog="Example: notes-server export --workspace file:///home/alice/notes ~/Notes")
@click.argument("directory", type=click.Path(file_okay=False))
@_common
def export(directory: str, workspace_uri: str, db: str | None, as_json: bool, sandbox: str) -> None:
    """Write every live note of the workspace under DIRECTORY, one file each, atomically."""
    from notes_server.cli.database import open_database
    from notes_server.features.folders.exporter import export_workspace

    workspace = _workspace(workspace_uri)
    with (
        _folder(directory, create=True) as fd,
        open_database(db) as engine,
        _progress("exporting", as_json) as progress,
        _stop_on_ctrl_c() as stop,
    ):
        _confine(sandbox, db, (directory,))
        summary = export_workspace(engine, fd, workspace, progress, stop)
    _report(summary, as_json)


@click.command(epilog="Example: notes-server sync --workspace file:///home/alice/notes ~/Notes")
@click.argument("directory", type=click.Path(file_okay=False))
@_common
@click.option("--watch", is_flag=True, help="Keep running: reconcile after every change.")
@click.option(
    "--interval",
    type=click.FloatRange(min=1, max=86400),
    default=30.0,
    show_default=True,
    help="With --watch: seconds between reconciles when no file changes (store-side edits).",
)
@click.option("--poll", is_flag=True, help="With --watch: poll (network or FUSE filesystems).")
@click.option(
    "--principal",
    default=None,
    help="Who the audit log names for the deletions and conflicts of this sync (default: "
    "$NOTES_SERVER_PRINCIPAL, else your login name).",
)
def sync(
    directory: str,
    workspace_uri: str,
    db: str | None,
    as_json: bool,
    watch: bool,
    interval: float,
    poll: bool,
    principal: str | None,
    sandbox: str,
) -> None:
    """Two-way sync between the workspace and DIRECTORY; both-sides edits keep both copies."""
    from notes_server.cli.database import open_database
    from notes_server.config import build_settings
    from notes_server.features.folders.sync import sync_folder
    from notes_server.tools.services import utc_now

    workspace = _workspace(workspace_uri)
    actor = build_settings(db=db, principal=principal).principal
    if watch:  # checked first: nothing is created, opened or announced without the watcher
        from notes_server.features.folders.watch import WatchUnavailable, require_watcher

        try:
            require_watcher()
        except WatchUnavailable as exc:
            raise StartupFailure(str(exc)) from None
    with _folder(directory, create=True) as fd, open_database(db) as engine:
        folder = os.path.realpath(directory)
        _confine(sandbox, db, (directory,))
        if not watch:
            with _progress("syncing", as_json) as progress, _stop_on_ctrl_c() as stop:
                summary = sync_folder(
                    engine,
                    fd,
                    workspace,
                    folder,
                    utc_now(),
                    actor=actor,
                    progress=progress,
                    stop=stop,
                )
            _report(summary, as_json)
            return
        _watch(
            engine,
            fd,
            workspace,
            folder,
            as_json=as_json,
            interval=interval,
            poll=poll,
            actor=actor,
        )


def _watch(
    engine: Any,
    fd: int,
    workspace: WorkspaceUri,
    folder: str,
    *,
    as_json: bool,
    interval: float,
    poll: bool,
    actor: str,
) -> None:
    from notes_server.features.folders.watch import WatchUnavailable, watch_folder
    from notes_server.tools.services import utc_now

    def report(summary: Summary) -> None:
        _report(summary, as_json, finished=False)
        sys.stdout.flush()

    click.echo(f"watching {folder} (Ctrl-C stops)", err=True)
    try:
        watch_folder(
            engine,
            fd,
            workspace,
            folder,
            clock=utc_now,
            report=report,
            interval=interval,
            poll=poll,
            actor=actor,
        )
    except WatchUnavailable as exc:
        raise StartupFailure(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


@click.command(
    epilog="Example: notes-server workspace mirror alice file:///home/alice/notes ~/Notes"
)
@click.argument("principal")
@click.argument("workspace_uri")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--db", default=None, metavar="URL", help=DB_HELP)
def mirror(principal: str, workspace_uri: str, directory: str, db: str | None) -> None:
    """Configure DIRECTORY as the folder the notes_import tool reads for PRINCIPAL's
    WORKSPACE_URI (a client can never name a folder itself)."""
    from notes_server.cli.database import open_database
    from notes_server.store import folders
    from notes_server.store.engine import write_tx
    from notes_server.tools.services import utc_now

    if not principal.strip():
        raise click.BadParameter("is empty", param_hint="PRINCIPAL")
    workspace = _workspace(workspace_uri)
    with _folder(directory, create=False):
        folder = os.path.realpath(directory)
    with open_database(db) as engine, write_tx(engine) as conn:
        created = folders.set_mirror(conn, principal, workspace.uri, folder, utc_now())
    verb = "mirrored" if created else "updated"
    click.echo(f"{verb}: notes_import for {principal} on {workspace.uri} reads {folder}")
    # A server confines its reads to the folders mirrored when it started.
    click.echo("a running server reads it after a restart")
