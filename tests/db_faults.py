"""Real database faults for tests: a garbage file, a read-only file or directory, a full disk.

No mocks: the kernel refuses the writes. Root ignores file modes, so as root a file or directory
is made read-only with the immutable attribute (chattr +i), which binds root too; a full disk is
a small tmpfs filled to the last block. A fault the machine cannot produce skips with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

GARBAGE = b"this is not an SQLite database, whatever its name says\n" * 200
TMPFS_SIZE = "2m"


def write_garbage(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GARBAGE)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` (a file or a directory) refuses writes, even to root, until the block ends."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: cannot make a path read-only for root")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextlib.contextmanager
def small_disk(mount_point: Path) -> Iterator[Path]:
    """A fresh tmpfs of TMPFS_SIZE mounted at `mount_point` (needs CAP_SYS_ADMIN)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(directory: Path) -> None:
    """Write into `directory` until its file system has no block left."""
    chunk = b"\0" * 4096
    with (directory / "filler").open("wb", buffering=0) as filler:
        while True:
            try:
                filler.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return
