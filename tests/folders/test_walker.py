"""The folder walker reads only plain files below its root, each refusal with a reason."""

from __future__ import annotations

import os
import socket
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from notes_server.features.folders.walker import (
    FolderError,
    Limits,
    NoteFile,
    Refusal,
    open_root,
    walk,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (tmp_path / "secret.md").write_text("TOP SECRET", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "hidden.md").write_text("TOP SECRET", encoding="utf-8")
    return folder


def _walk(root: Path, limits: Limits | None = None) -> Iterator[NoteFile | Refusal]:
    fd = open_root(str(root))
    try:
        yield from walk(fd, limits or Limits())
    finally:
        os.close(fd)


def files(root: Path, limits: Limits | None = None) -> dict[str, bytes]:
    return {"/".join(i.path): i.data for i in _walk(root, limits) if isinstance(i, NoteFile)}


def refusals(root: Path, limits: Limits | None = None) -> dict[str, str]:
    return {i.path: i.reason for i in _walk(root, limits) if isinstance(i, Refusal)}


def test_notes_are_read_recursively_with_their_relative_paths(root: Path) -> None:
    (root / "a.md").write_bytes(b"A")
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "sub" / "b.markdown").write_bytes(b"B")
    (root / "sub" / "deeper" / "c.txt").write_bytes(b"C")
    (root / "image.png").write_bytes(b"png")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "x.md").write_bytes(b"hidden")

    assert files(root) == {"a.md": b"A", "sub/b.markdown": b"B", "sub/deeper/c.txt": b"C"}
    assert refusals(root) == {}


def test_a_symlinked_file_is_refused_not_followed(root: Path) -> None:
    (root / "evil.md").symlink_to(root.parent / "secret.md")

    assert files(root) == {}
    assert refusals(root) == {"evil.md": "symlink (not followed)"}


def test_a_symlinked_directory_is_refused_not_entered(root: Path) -> None:
    (root / "linked").symlink_to(root.parent / "outside")

    assert files(root) == {}
    assert refusals(root) == {"linked": "symlink (not followed)"}


def test_a_symlink_loop_is_refused(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    (root / "up").symlink_to(root)

    assert refusals(root) == {"loop": "symlink (not followed)", "up": "symlink (not followed)"}


def test_a_hard_linked_file_is_refused_under_every_name(root: Path) -> None:
    os.link(root.parent / "secret.md", root / "copy.md")

    assert files(root) == {}
    assert refusals(root) == {"copy.md": "hard link (2 names for one file)"}


def test_fifos_and_sockets_are_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.md"))

        assert refusals(root) == {"pipe.md": "named pipe (FIFO)", "sock.md": "socket"}


def test_a_device_node_is_refused(root: Path) -> None:
    # Device nodes cannot be made without privileges; a bind of /dev/null is not possible
    # either, so this walks /dev itself, which always holds character devices.
    found = refusals(Path("/dev"), Limits(max_files=0, max_depth=0))

    assert found.get("null") == "device"


def test_files_over_the_size_limit_are_refused(root: Path) -> None:
    (root / "big.md").write_bytes(b"x" * 1001)
    (root / "fits.md").write_bytes(b"x" * 1000)

    assert list(files(root, Limits(max_file_bytes=1000))) == ["fits.md"]
    assert refusals(root, Limits(max_file_bytes=1000)) == {"big.md": "larger than 1000 bytes"}


def test_the_file_count_and_depth_are_bounded(root: Path) -> None:
    for n in range(3):
        (root / f"{n}.md").write_bytes(b"x")
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "deep.md").write_bytes(b"x")
    limits = Limits(max_files=2, max_depth=2)

    assert list(files(root, limits)) == ["0.md", "1.md"]
    assert refusals(root, limits) == {
        "2.md": "over the limit of 2 files",
        "a/b/c": "deeper than 2 folders",
    }


def test_names_must_pass_the_note_path_rules(root: Path) -> None:
    nfd = unicodedata.normalize("NFD", "café.md")
    (root / nfd).write_bytes(b"x")
    (root / "tab\there.md").write_bytes(b"x")
    (root / "fullwidth\uff0e\uff0e").mkdir()
    os.close(os.open(os.fsencode(root) + b"/latin1-\xe9.md", os.O_CREAT | os.O_WRONLY, 0o644))
    (root / "café.md").write_bytes(b"nfc")

    assert files(root) == {"café.md": b"nfc"}
    reasons = refusals(root)
    assert reasons == {
        "cafe\\u0301.md": "name refused: path segment must be NFC-normalized",
        "fullwidth\\uff0e\\uff0e": "name refused: look-alike of dot or slash not allowed",
        "latin1-\\udce9.md": "name refused: name is not valid UTF-8",
        "tab\\there.md": "name refused: control or invisible character not allowed",
    }


def test_the_root_itself_may_not_be_a_symlink_or_missing(root: Path) -> None:
    (root.parent / "alias").symlink_to(root)

    with pytest.raises(FolderError, match="is a symlink"):
        open_root(str(root.parent / "alias"))
    with pytest.raises(FolderError, match="no such directory"):
        open_root(str(root.parent / "missing"))
    with pytest.raises(FolderError, match="not a directory"):
        open_root(str(root.parent / "secret.md"))


def test_the_total_bytes_read_are_bounded(root: Path) -> None:
    for n in range(4):
        (root / f"{n}.md").write_bytes(b"x" * 400)
    limits = Limits(max_total_bytes=1000)

    assert list(files(root, limits)) == ["0.md", "1.md"]
    assert refusals(root, limits) == {
        "2.md": "over the limit of 1000 bytes in all",
        "3.md": "over the limit of 1000 bytes in all",
    }
