"""The third layer: an OS sandbox (Linux Landlock) for the serving process.

Authorization and containment are checks in our code; this layer holds even if that code is
wrong. Notes live in the database and no code path opens a file named by a client, so the
serving process only needs to write beside its database (SQLite's WAL and shm files, the state
key file) and in the temporary directories. Once `restrict` runs, the kernel refuses every other
file creation, write, rename or removal, and, for an embedded SQLite deployment, every TCP bind
and connect. Reads stay allowed (imports happen lazily).

Landlock applies to the calling thread and the threads it creates afterwards, so `restrict` must
run before any worker thread starts.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

FS_WRITE_FILE = 1 << 1
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4

_WRITE_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)


class SandboxUnavailable(RuntimeError):
    """The kernel (or platform) offers no Landlock; the caller decides whether that is fatal."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock ABI the kernel supports, or 0 when there is none."""
    if os.uname().sysname != "Linux":
        return 0
    try:
        version = int(_libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def write_rights(abi: int) -> int:
    rights = _WRITE_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def restrict(writable: Iterable[Path], *, deny_tcp: bool) -> int:
    """Confine this thread (and later threads) to writing under `writable`; returns the ABI."""
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("Landlock is not available on this kernel")
    libc = _libc()
    rights = write_rights(abi)
    attr = _RulesetAttr(rights, NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 4 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = int(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        raise SandboxUnavailable(
            f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
        )
    try:
        for directory in writable:
            _allow(libc, ruleset, directory, rights)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxUnavailable("prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise SandboxUnavailable(
                f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
            )
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, directory: Path, rights: int) -> None:
    if not directory.is_dir():
        return
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise SandboxUnavailable(f"landlock_add_rule failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def writable_dirs(database: Path | None) -> list[Path]:
    """Where a serving process may write: beside its SQLite file, and the temp directories."""
    import tempfile

    dirs = [Path(tempfile.gettempdir()), Path("/var/tmp")]
    if database is not None:
        dirs.insert(0, database.parent)
    return dirs


def confine(mode: str, database: Path | None, *, allow_network: bool) -> str:
    """Apply the sandbox per `mode` (auto, require, off); return a short status for the banner.

    `require` fails closed: no Landlock means no serving. `auto` serves unconfined with a
    warning on kernels without Landlock (e.g. macOS, old Linux).
    """
    if mode == "off":
        return "sandbox off"
    try:
        abi = restrict(writable_dirs(database), deny_tcp=not allow_network)
    except SandboxUnavailable:
        if mode == "require":
            raise
        return "sandbox unavailable"
    return f"sandbox landlock v{abi}"
