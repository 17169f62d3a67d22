"""Walk a folder relative to one directory descriptor, refusing anything but plain files.

Lexical containment (checking a path string) cannot stop a symlink: the kernel resolves the
link when the file is opened, and the link can be swapped in between the check and the open.
So nothing here opens a path string below the root: each name is opened with
``O_NOFOLLOW`` relative to its parent's descriptor, then the opened descriptor is ``fstat``-ed
and must be the very inode the ``lstat`` saw (same device and inode, a regular file or a
directory, one link). Whatever the name pointed to at any moment, what is read is what was
checked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from notes_server.errors import UriError
from notes_server.security.uri import parse_new_note_path

NOTE_SUFFIXES = (".md", ".markdown", ".txt")
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_PREFIX = ".notes-server-"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one walk: a hostile or mistaken folder cannot exhaust memory or time."""

    max_file_bytes: int = 1_000_000
    max_files: int = 100_000
    max_depth: int = 32
    max_total_bytes: int = 512_000_000  # sync holds a whole folder's notes in memory


@dataclass(frozen=True, slots=True)
class NoteFile:
    """A regular file read through a checked descriptor."""

    path: tuple[str, ...]
    data: bytes
    mtime: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """Something under the folder that was not read, and why (the path is relative)."""

    path: str
    reason: str


class FolderError(Exception):
    """The folder itself cannot be used (missing, not a directory, a symlink)."""


def open_root(directory: str, *, create: bool = False) -> int:
    """A descriptor on the folder the operator named; its last component may not be a symlink.

    The operator's own path is trusted up to there; everything below is opened through the fd.
    """
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    try:
        if stat.S_ISLNK(os.lstat(directory).st_mode):
            raise FolderError(f"{directory}: is a symlink; name the real directory")
        return os.open(directory, DIR_FLAGS)
    except FileNotFoundError:
        raise FolderError(f"{directory}: no such directory") from None
    except NotADirectoryError:
        raise FolderError(f"{directory}: not a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FolderError(f"{directory}: is a symlink; name the real directory") from None
        raise FolderError(f"{directory}: {exc.strerror}") from None


def shown(path: tuple[str, ...] | list[str], name: str = "") -> str:
    """A relative path for a summary line: undecodable bytes and controls escaped."""
    text = "/".join([*path, name] if name else path)
    return text.encode("unicode_escape").decode("ascii")


def check_name(parent: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The note-path segments for ``name`` under ``parent``: the same rules as a note path
    a client asks to write, so an imported name can never become a traversal later."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise UriError("name is not valid UTF-8") from None
    return (*parent, *parse_new_note_path(name))


def walk(root_fd: int, limits: Limits = Limits()) -> Iterator[NoteFile | Refusal]:
    """Every note file under ``root_fd`` (sorted, depth first), and a Refusal for anything
    that was not read. Hidden names (a leading dot) and other suffixes are passed over."""
    counter = [0, 0]  # files seen, bytes read
    yield from _walk_dir(root_fd, (), limits, counter)


def _walk_dir(
    dir_fd: int, parent: tuple[str, ...], limits: Limits, counter: list[int]
) -> Iterator[NoteFile | Refusal]:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        yield Refusal(shown(parent) or ".", f"cannot list: {exc.strerror}")
        return
    for name in names:
        if name.startswith("."):
            continue
        try:
            path = check_name(parent, name)
        except UriError as exc:
            yield Refusal(shown(parent, name), f"name refused: {exc}")
            continue
        yield from _visit(dir_fd, name, path, limits, counter)


def _visit(
    dir_fd: int, name: str, path: tuple[str, ...], limits: Limits, counter: list[int]
) -> Iterator[NoteFile | Refusal]:
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        yield Refusal(shown(path), f"cannot stat: {exc.strerror}")
        return
    problem = kind_problem(before.st_mode)
    if problem is not None:
        yield Refusal(shown(path), problem)
        return
    if stat.S_ISDIR(before.st_mode):
        yield from _descend(dir_fd, name, path, before, limits, counter)
        return
    if not name.lower().endswith(NOTE_SUFFIXES):
        return
    counter[0] += 1
    if counter[0] > limits.max_files:
        yield Refusal(shown(path), f"over the limit of {limits.max_files} files")
        return
    room = min(limits.max_file_bytes, limits.max_total_bytes - counter[1])
    item = read_checked(dir_fd, name, path, before, room)
    if isinstance(item, Refusal) and room < limits.max_file_bytes and "larger than" in item.reason:
        item = Refusal(item.path, f"over the limit of {limits.max_total_bytes} bytes in all")
    elif isinstance(item, NoteFile):
        counter[1] += len(item.data)
    yield item


def kind_problem(mode: int) -> str | None:
    """Why an entry of this type is not read (None: a directory or a regular file)."""
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "symlink (not followed)"
    if stat.S_ISFIFO(mode):
        return "named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "not a regular file"


def _descend(
    dir_fd: int,
    name: str,
    path: tuple[str, ...],
    before: os.stat_result,
    limits: Limits,
    counter: list[int],
) -> Iterator[NoteFile | Refusal]:
    if len(path) > limits.max_depth:
        yield Refusal(shown(path), f"deeper than {limits.max_depth} folders")
        return
    try:
        child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        yield Refusal(shown(path), _open_reason(exc))
        return
    try:
        after = os.fstat(child)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            yield Refusal(shown(path), "changed while being opened")
            return
        yield from _walk_dir(child, path, limits, counter)
    finally:
        os.close(child)


def read_checked(
    dir_fd: int, name: str, path: tuple[str, ...], before: os.stat_result | None, max_bytes: int
) -> NoteFile | Refusal:
    """Open ``name`` without following links and read it, if the opened inode is a regular,
    singly linked file within the size limit (and the one ``before`` described, if given)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return Refusal(shown(path), _open_reason(exc))
    try:
        after = os.fstat(fd)
        problem = file_problem(after, before, max_bytes)
        if problem is not None:
            return Refusal(shown(path), problem)
        data = _read_bounded(fd, max_bytes)
        if data is None:
            return Refusal(shown(path), f"larger than {max_bytes} bytes")
        return NoteFile(path, data, after.st_mtime)
    finally:
        os.close(fd)


def file_problem(
    after: os.stat_result, before: os.stat_result | None, max_bytes: int
) -> str | None:
    """Why an opened descriptor may not be read as a note file."""
    if not stat.S_ISREG(after.st_mode):
        return kind_problem(after.st_mode) or "not a regular file"
    if before is not None and (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        return "changed while being opened"
    if after.st_nlink > 1:
        return f"hard link ({after.st_nlink} names for one file)"
    if after.st_size > max_bytes:
        return f"larger than {max_bytes} bytes"
    return None


def _read_bounded(fd: int, max_bytes: int) -> bytes | None:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:
            return None
        chunks.append(chunk)


def _open_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink (not followed)"
    if exc.errno == errno.ENOTDIR:
        return "not a directory any more"
    return f"cannot open: {exc.strerror}"


def count_notes(root_fd: int, limits: Limits = Limits()) -> int:
    """How many note files a walk would visit, without reading any (for a progress total).
    The same descriptor-relative, no-follow descent as ``walk``; errors count nothing."""
    return _count_dir(root_fd, 0, limits)


def _count_dir(dir_fd: int, depth: int, limits: Limits) -> int:
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return 0
    total = 0
    for name in names:
        if name.startswith("."):
            continue
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and name.lower().endswith(NOTE_SUFFIXES):
            total += 1
        elif stat.S_ISDIR(mode) and depth < limits.max_depth:
            total += _count_subdir(dir_fd, name, depth + 1, limits)
    return min(total, limits.max_files)


def _count_subdir(dir_fd: int, name: str, depth: int, limits: Limits) -> int:
    try:
        child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return 0
    try:
        return _count_dir(child, depth, limits)
    finally:
        os.close(child)
