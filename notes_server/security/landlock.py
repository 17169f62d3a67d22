"""Linux Landlock through ctypes: what the kernel can confine, at the newest ABI it offers.

Landlock rights are deny-by-default for the rights a ruleset "handles". We handle every write
right the kernel knows and grant them back only on named files. Reads (read, list, execute) are
handled only when the caller names what stays readable (`readable`): modules import lazily, so
that list must hold every place Python may still load code from. Rules are per inode, so a
granted file must exist when the rule is added; a readable path that does not exist is skipped.

ABI levels used: 1 writes/creation/removal, 2 REFER (rename/link across dirs), 3 TRUNCATE,
4 TCP bind/connect, 5 IOCTL on devices, 6 scopes (abstract Unix sockets, signals). ABI 7 only
adds audit-logging flags; the kernel's default (log denials of this process) is kept.
Landlock cannot restrict chmod, chown, utime, xattrs, UDP or pathname Unix-socket connect up to
ABI 7; `seccomp` covers what it can of those.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable
from pathlib import Path

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
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
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

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
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
# The rights the kernel accepts in a rule on a file that is not a directory.
_ON_A_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
# A writable file (the database and its companions): read and write it, nothing else.
_FILE_RIGHTS = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE
# Beneath a mirrored folder: write, create and remove regular files and folders, and rename
# within a directory (atomic replace); no devices, FIFOs, sockets, symlinks, or renames across
# directories (REFER).
_FOLDER_RIGHTS = (
    FS_READ_FILE
    | FS_READ_DIR
    | FS_WRITE_FILE
    | FS_TRUNCATE
    | FS_MAKE_REG
    | FS_MAKE_DIR
    | FS_REMOVE_FILE
    | FS_REMOVE_DIR
)
# Beneath a readable place: read files, list folders, execute (the interpreter, libraries).
_READ_ONLY_RIGHTS = READ_RIGHTS


class LandlockError(RuntimeError):
    """Landlock is missing or refused the ruleset; the message says which step failed."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


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
    """Every write-like filesystem right this ABI can handle."""
    rights = _WRITE_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def _ruleset_attr(
    abi: int, *, deny_bind: bool, deny_connect: bool, reads: bool
) -> tuple[_RulesetAttr, int]:
    """The ruleset attribute and the size to pass (older kernels reject unknown trailing fields)."""
    net = (NET_BIND_TCP if deny_bind else 0) | (NET_CONNECT_TCP if deny_connect else 0)
    fs = write_rights(abi) | (READ_RIGHTS if reads else 0)
    attr = _RulesetAttr(fs, net if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        return attr, ctypes.sizeof(_RulesetAttr)
    if abi >= 4:
        return attr, 2 * ctypes.sizeof(ctypes.c_uint64)
    return attr, ctypes.sizeof(ctypes.c_uint64)


def restrict(
    writable_files: Iterable[Path],
    *,
    deny_bind: bool,
    deny_connect: bool,
    writable_folders: Iterable[Path] = (),
    readable: Iterable[Path] | None = None,
    connect_ports: Iterable[int] = (),
) -> int:
    """Confine this thread (and threads and children it creates later): writes only to
    `writable_files` and beneath `writable_folders` (where files and folders may also be
    created, removed and renamed in place), nothing elsewhere; when `readable` is given, reads
    (and execution) only of those files, beneath those folders and of the writable places.
    With `deny_connect`, TCP connections to `connect_ports` stay allowed (ABI 4: before it,
    Landlock handles no network at all). Returns the ABI used."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available on this kernel")
    libc = _libc()
    attr, size = _ruleset_attr(
        abi, deny_bind=deny_bind, deny_connect=deny_connect, reads=readable is not None
    )
    ruleset = int(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        raise LandlockError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    handled = attr.handled_access_fs
    try:
        for path in writable_files:
            _allow(libc, ruleset, path, _FILE_RIGHTS & handled)
        for path in writable_folders:
            _allow(libc, ruleset, path, _FOLDER_RIGHTS & handled)
        for path in readable or ():
            _allow(libc, ruleset, path, _READ_ONLY_RIGHTS & handled, missing_ok=True)
        if deny_connect and abi >= 4:
            for port in connect_ports:
                rule = _NetPortAttr(NET_CONNECT_TCP, port)
                if libc.syscall(SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), 0) != 0:
                    raise LandlockError(
                        f"landlock_add_rule failed for port {port}: "
                        f"{os.strerror(ctypes.get_errno())}"
                    )
        no_new_privs(libc)
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise LandlockError(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def no_new_privs(libc: ctypes.CDLL) -> None:
    """Required before an unprivileged process may restrict itself (Landlock, seccomp)."""
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise LandlockError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")


def _allow(
    libc: ctypes.CDLL, ruleset: int, path: Path, rights: int, *, missing_ok: bool = False
) -> None:
    """Grant `rights` on one existing file (a symlink's target: what SQLite opens) or beneath
    one existing directory; on a file, only the rights the kernel accepts there."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if missing_ok:  # a place that is not there (or not reachable) needs no grant
            return
        raise LandlockError(f"cannot grant access to {path.name}: {exc.strerror}") from None
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _ON_A_FILE
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise LandlockError(
                f"landlock_add_rule failed for {path.name}: {os.strerror(ctypes.get_errno())}"
            )
    finally:
        os.close(fd)
