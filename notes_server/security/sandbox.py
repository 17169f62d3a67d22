"""The third layer: an OS sandbox (Linux Landlock + a seccomp filter) for the serving process.

Authorization and containment are checks in our code; this layer holds even if that code is
wrong. Notes live in the database and no code path opens a file named by a client, so once
confined the serving process may write only its SQLite database file and that file's -wal and
-shm companions; it can create, remove, rename or link no file anywhere (not even beside the
database), change no file's mode, owner, times or xattrs, and, for a stdio server on embedded
SQLite, open no socket at all (TCP, UDP, Unix). Reads stay allowed for a plain `serve`; a
folder command, and a `serve` with mirrored folders, may read only what the interpreter needs
(`runtime_reads`), its database and the mirrored folders.

Landlock and seccomp bind the calling thread and the threads and processes it creates later,
so `confine` refuses to run while other threads exist, and callers confine before loading any
extension code (`--tools-module`), before the warm-up thread and before uvicorn.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from notes_server.errors import StoreError
from notes_server.security import landlock, seccomp
from notes_server.security.landlock import abi_version
from notes_server.security.runtime_reads import runtime_places

__all__ = [
    "Policy",
    "SandboxUnavailable",
    "abi_version",
    "confine",
    "policy_for",
    "policy_for_folder",
]

# Makes the SQLite file's -wal and -shm companions exist and keep existing (the store's
# `sqlite_file.hold_open_in_wal`); returns every file the confined process may write.
HoldDatabase = Callable[[Path], Sequence[Path]]


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be applied; the caller decides whether that is fatal."""


class Policy(NamedTuple):
    """What a confined serving process may still do. (A NamedTuple: immutable like a frozen
    dataclass, without compiling its methods at every start.)"""

    database: Path | None  # the SQLite file (with its -wal and -shm) it may write, if any
    tcp_bind: bool
    tcp_connect: bool
    sockets: bool  # may create sockets at all (socket(2))
    folders: tuple[Path, ...] = ()  # mirrored folders it may write beneath (export, sync)
    # None: reads are not confined; else what it may read beside the runtime, the database
    # and `folders` (the folders import and notes_import read).
    reads: tuple[Path, ...] | None = None
    # TCP ports it may still connect to when `tcp_connect` is False (`--auth oauth`: 443, for
    # client metadata documents).
    connect_ports: tuple[int, ...] = ()

    def readable(self) -> list[Path] | None:
        """Every place the confined process may read, or None when reads stay open."""
        if self.reads is None:
            return None
        # The database files are readable through their write rules. Not their directory:
        # SQLite only opens it to fsync it after creating a journal, ignores a failure there,
        # and in WAL mode (which confinement requires) creates none.
        places = runtime_places(database_server=self.database is None)
        return [*places, *self.reads]


def policy_for(
    database: Path | None,
    *,
    transport: str,
    reads: tuple[Path, ...] | None = None,
    connect_ports: tuple[int, ...] | None = (),
) -> Policy:
    """stdio on embedded SQLite needs no network; HTTP listens but never connects out, except
    to `connect_ports` (None: anywhere); a database server (no SQLite file) needs its TCP or
    Unix-socket connection. `reads`: confine reads too, to the runtime, the database and
    these places (mirrored folders, key file)."""
    if database is None:
        return Policy(None, tcp_bind=True, tcp_connect=True, sockets=True, reads=reads)
    if transport == "http":
        connect_anywhere = connect_ports is None
        return Policy(
            database,
            tcp_bind=True,
            tcp_connect=connect_anywhere,
            sockets=True,
            reads=reads,
            connect_ports=connect_ports or (),
        )
    return Policy(database, tcp_bind=False, tcp_connect=False, sockets=False, reads=reads)


def policy_for_folder(
    database: Path | None, folders: tuple[Path, ...], *, reads: tuple[Path, ...] = ()
) -> Policy:
    """An import, export or sync: its database and, for export and sync, the mirrored folder
    (read-write); `reads` (import) are read only. Nothing else is read or written; no listening
    ever, and no network at all on embedded SQLite."""
    if database is None:
        return Policy(
            None, tcp_bind=False, tcp_connect=True, sockets=True, folders=folders, reads=reads
        )
    return Policy(
        database, tcp_bind=False, tcp_connect=False, sockets=False, folders=folders, reads=reads
    )


def thread_count() -> int:
    """Threads in this process: Python's count, or the kernel's when a C extension started
    threads Python does not know about."""
    try:
        kernel = len(os.listdir("/proc/self/task"))
    except OSError:
        kernel = 0
    return max(threading.active_count(), kernel)


def confine(mode: str, policy: Policy, *, hold_database: HoldDatabase) -> str:
    """Apply the sandbox per `mode` (auto, require, off); return a short status for the banner.
    `hold_database` prepares the policy's SQLite file first (the store knows how: WAL mode,
    a connection kept open so its companion files stay).

    `require` fails closed (SandboxUnavailable): no Landlock, no seccomp filter, or other
    threads already running mean no serving. `auto` serves unconfined and says why.
    """
    if mode == "off":
        return "sandbox off"
    problem = _precondition_problem()
    if problem is not None:
        if mode == "require":
            raise SandboxUnavailable(problem)
        return f"not confined: {problem}"
    try:
        files = _database_files(policy.database, hold_database)
        abi = landlock.restrict(
            files,
            deny_bind=not policy.tcp_bind,
            deny_connect=not policy.tcp_connect,
            writable_folders=policy.folders,
            readable=policy.readable(),
            connect_ports=policy.connect_ports,
        )
    except landlock.LandlockError as exc:
        if mode == "require":
            raise SandboxUnavailable(str(exc)) from None
        return f"not confined: {exc}"
    try:
        seccomp.install(deny_sockets=not policy.sockets)
    except (landlock.LandlockError, seccomp.SeccompError) as exc:
        if mode == "require":
            raise SandboxUnavailable(str(exc)) from None
        return f"sandbox landlock v{abi}, no seccomp: {exc}"
    return f"sandbox landlock v{abi} + seccomp"


def _precondition_problem() -> str | None:
    if abi_version() < 1:
        return "Landlock is not available on this kernel"
    if not seccomp.supported():
        return "no seccomp filter for this machine"
    if thread_count() > 1:
        return "other threads exist"
    return None


def _database_files(database: Path | None, hold_database: HoldDatabase) -> list[Path]:
    """The files the confined process may write: none on a database server; else the SQLite
    file and its companions, held open by the store. A file that cannot be held fails like a
    Landlock refusal."""
    if database is None:
        return []
    try:
        return list(hold_database(database))
    except StoreError as exc:
        raise landlock.LandlockError(str(exc)) from None
