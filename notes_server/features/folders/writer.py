"""Writes below a folder descriptor: directories created and entered without following links,
files replaced atomically (a temp file in the same directory, fsync, rename, fsync of the
directory). ``rename`` replaces the name itself and never follows a link at the target, so
nothing is ever written outside the folder whatever is swapped in meanwhile."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

from notes_server.features.folders.walker import DIR_FLAGS, TEMP_PREFIX, kind_problem

WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class WriteRefused(Exception):
    """A path could not be written safely; the message is the reason for the summary."""


def open_parent(root_fd: int, folders: tuple[str, ...], *, create: bool) -> int:
    """A new descriptor on ``folders`` below ``root_fd``, each step opened with O_NOFOLLOW
    (created 0o700 if missing and ``create``); the caller closes it."""
    fd = os.dup(root_fd)
    try:
        for name in folders:
            child = _enter(fd, name, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _enter(fd: int, name: str, *, create: bool) -> int:
    for _attempt in range(2):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise WriteRefused(f"folder {name!r} is missing") from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise WriteRefused(f"{name!r} is not a plain folder (symlink?)") from None
            raise WriteRefused(f"cannot open folder {name!r}: {exc.strerror}") from None
    raise WriteRefused(f"folder {name!r} keeps disappearing")


def write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dir_fd`` with ``data``: readers see the old or the new file, never
    a part; a symlink, folder or other special file at ``name`` is refused, not replaced."""
    mode = 0o644
    try:
        current = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if current is not None:
        problem = kind_problem(current.st_mode) or (
            "folder" if stat.S_ISDIR(current.st_mode) else None
        )
        if problem is not None:
            raise WriteRefused(f"a {problem} is in the way")
        mode = stat.S_IMODE(current.st_mode)
    temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, WRITE_FLAGS, mode, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise WriteRefused(f"cannot write: {exc.strerror}") from None
    os.fsync(dir_fd)


def remove(dir_fd: int, name: str) -> None:
    """Unlink ``name`` (never follows a link: a symlink there is removed, not its target)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
