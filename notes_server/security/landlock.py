"""Linux Landlock through ctypes: what the kernel can confine, at the newest ABI it offers.

Landlock rights are deny-by-default for the rights a ruleset "handles". We handle every write
right the kernel knows and grant them back only on named files; reads are not handled (imports
happen lazily). Rules are per inode, so a granted file must exist when the rule is added.

ABI levels used: 1 writes/creation/removal, 2 REFER (rename/link across dirs), 3 TRUNCATE,
4 TCP bind/connect, 5 IOCTL on devices, 6 scopes (abstract Unix sockets, signals). ABI 7 only
adds audit-logging flags; the kernel's default (log denials of this process) is kept.
Landlock cannot restrict chmod, chown, utime, xattrs, UDP or pathname Unix-socket connect up to
ABI 7; `seccomp` covers what it can of those.
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
RULE_NET_PORT = 2
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
# The only rights a rule on a regular file (not a directory) may grant that we handle.
_FILE_RIGHTS = FS_WRITE_FILE | FS_TRUNCATE
# Beneath a mirrored folder: write, create and remove regular files and folders, and rename
# within a directory (atomic replace); no devices, FIFOs, sockets, symlinks, or renames across
# directories (REFER).
_FOLDER_RIGHTS = (
    FS_WRITE_FILE | FS_TRUNCATE | FS_MAKE_REG | FS_MAKE_DIR | FS_REMOVE_FILE | FS_REMOVE_DIR
)


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


def _ruleset_attr(abi: int, *, deny_bind: bool, deny_connect: bool) -> tuple[_RulesetAttr, int]:
    """The ruleset attribute and the size to pass (older kernels reject unknown trailing fields)."""
    net = (NET_BIND_TCP if deny_bind else 0) | (NET_CONNECT_TCP if deny_connect else 0)
    attr = _RulesetAttr(write_rights(abi), net if abi >= 4 else 0, 0)
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
) -> int:
    """Confine this thread (and threads and children it creates later): writes only to
    `writable_files` and beneath `writable_folders` (where files and folders may also be
    created, removed and renamed in place), nothing elsewhere; returns the ABI used."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available on this kernel")
    libc = _libc()
    attr, size = _ruleset_attr(abi, deny_bind=deny_bind, deny_connect=deny_connect)
    ruleset = int(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        raise LandlockError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for path in writable_files:
            _allow_file(libc, ruleset, path, _FILE_RIGHTS & attr.handled_access_fs)
        for path in writable_folders:
            _allow_file(libc, ruleset, path, _FOLDER_RIGHTS & attr.handled_access_fs)
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


def _allow_file(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int) -> None:
    """Grant `rights` on one existing regular file (a symlink's target: what SQLite opens) or
    beneath one existing directory."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise LandlockError(
                f"landlock_add_rule failed for {path.name}: {os.strerror(ctypes.get_errno())}"
            )
    finally:
        os.close(fd)
