"""A small seccomp filter for what Landlock cannot confine (chmod, chown, utime, xattrs, sockets).

seccomp sees syscall numbers and arguments, never paths, so a denied syscall is denied
everywhere: the serving process never needs to change metadata once confined (its database,
WAL and shm files exist before the filter is installed, so SQLite creates nothing afterwards).
`socket(2)` is denied only when the deployment needs no network at all (stdio with embedded
SQLite): that closes UDP, Unix-socket connect (pathname and abstract) and raw sockets at once.
io_uring is always denied: its operations (socket, setxattr) would bypass this filter.

Hand-built classic BPF, x86_64 and aarch64 only; other machines get SeccompError.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from notes_server.security.landlock import no_new_privs

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000

# Syscall numbers introduced since 6.6 are the same on every architecture.
_COMMON_METADATA = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}


class _Arch:
    def __init__(self, audit: int, seccomp: int, socket: int, metadata: dict[str, int]) -> None:
        self.audit, self.seccomp, self.socket = audit, seccomp, socket
        self.metadata = {**metadata, **_COMMON_METADATA}


_ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        317,
        41,
        {
            "chmod": 90,
            "fchmod": 91,
            "chown": 92,
            "fchown": 93,
            "lchown": 94,
            "utime": 132,
            "setxattr": 188,
            "lsetxattr": 189,
            "fsetxattr": 190,
            "removexattr": 197,
            "lremovexattr": 198,
            "fremovexattr": 199,
            "utimes": 235,
            "fchownat": 260,
            "futimesat": 261,
            "fchmodat": 268,
            "utimensat": 280,
        },
    ),
    "aarch64": _Arch(
        0xC00000B7,
        277,
        198,
        {
            "setxattr": 5,
            "lsetxattr": 6,
            "fsetxattr": 7,
            "removexattr": 14,
            "lremovexattr": 15,
            "fremovexattr": 16,
            "fchmod": 52,
            "fchmodat": 53,
            "fchownat": 54,
            "fchown": 55,
            "utimensat": 88,
        },
    ),
}


class SeccompError(RuntimeError):
    """The filter could not be installed; the message says why."""


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def supported() -> bool:
    return os.uname().sysname == "Linux" and platform.machine() in _ARCHES


def program(machine: str, *, deny_sockets: bool) -> list[tuple[int, int, int, int]]:
    """The filter: other architectures' syscalls (x32, i386 via int 0x80) and the denied ones
    fail with EPERM (EACCES for socket, as socket(2) documents for a refused creation)."""
    arch = _ARCHES[machine]
    deny_all = (_RET_K, 0, 0, RET_ERRNO | errno.EPERM)
    insns = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, arch.audit), deny_all, (_LD_W_ABS, 0, 0, 0)]
    if machine == "x86_64":
        insns += [(_JGE_K, 0, 1, _X32_SYSCALL_BIT), deny_all]
    denied = {nr: errno.EPERM for nr in [*arch.metadata.values(), *_IO_URING.values()]}
    if deny_sockets:
        denied[arch.socket] = errno.EACCES
    for nr, code in sorted(denied.items()):
        insns += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, RET_ERRNO | code)]
    insns.append((_RET_K, 0, 0, RET_ALLOW))
    return insns


def install(*, deny_sockets: bool) -> None:
    """Install the filter on every thread of this process (TSYNC) and its future children."""
    if not supported():
        raise SeccompError(f"no seccomp filter for {platform.machine()} on {os.uname().sysname}")
    machine = platform.machine()
    insns = program(machine, deny_sockets=deny_sockets)
    array = (_Insn * len(insns))(*[_Insn(*insn) for insn in insns])
    prog = _Prog(len(insns), ctypes.cast(array, ctypes.POINTER(_Insn)))
    libc = ctypes.CDLL(None, use_errno=True)
    no_new_privs(libc)
    nr = _ARCHES[machine].seccomp
    result = libc.syscall(
        nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)
    )
    if result != 0:
        reason = os.strerror(ctypes.get_errno()) if result < 0 else f"thread {result} not synced"
        raise SeccompError(f"seccomp filter refused: {reason}")
