"""Behaviour of key rings: parsing, rotation order, redaction, and the shared key file."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import pytest

from notes_server.security import keyring
from notes_server.security.keyring import KeyRing, StateKey
from notes_server.security.state import StateSealer

CLAIMS: dict[str, Any] = {"tool": "delete_note", "workspace": "ws-1", "path": "a/b.md"}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def key(kid: str, fill: int) -> StateKey:
    return StateKey(kid, bytes([fill]) * 32)


# --- key ring parsing ----------------------------------------------------------------------


SECRET_A = b64(bytes(range(32)))
SECRET_B = b64(bytes(range(100, 132)))


def test_parse_multi_key_spec_keeps_order_and_tolerates_whitespace() -> None:
    ring = KeyRing.parse(f"  k2:{SECRET_B} ,\tk1:{SECRET_A}\n")
    assert ring.sealing_key == StateKey("k2", bytes(range(100, 132)))
    assert ring.get("k1") == StateKey("k1", bytes(range(32)))
    assert ring.get("k3") is None
    assert [k.kid for k in ring.keys] == ["k2", "k1"]


def test_generated_spec_parses_to_one_fresh_key() -> None:
    first, second = KeyRing.generate_spec(), KeyRing.generate_spec()
    assert first != second
    ring = KeyRing.parse(first)
    assert len(ring.keys) == 1
    assert len(ring.sealing_key.secret) == 32


@pytest.mark.parametrize(
    ("spec", "secret_text"),
    [
        (f"k1:{SECRET_A},k1:{SECRET_B}", SECRET_B),
        (f"k1:{SECRET_A}=", SECRET_A),
        (f"k1:{SECRET_A[:-1]}+", SECRET_A[:-1]),
        (f"k1:{SECRET_A}!", SECRET_A),
        (f"k1:{b64(bytes(range(31)))}", b64(bytes(range(31)))),
        (f"k1:{b64(bytes(range(33)))}", b64(bytes(range(33)))),
        (f"k.1:{SECRET_A}", SECRET_A),
        (f"k 1:{SECRET_A}", SECRET_A),
        (f"{'k' * 17}:{SECRET_A}", SECRET_A),
        (f":{SECRET_A}", SECRET_A),
        (SECRET_A, SECRET_A),
        (f"k1:{SECRET_A},", SECRET_A),
        (f"k1:{SECRET_A},,k2:{SECRET_B}", SECRET_B),
        ("", "\x00"),
        ("   ", "\x00"),
    ],
)
def test_parse_rejects_malformed_specs_without_echoing_secrets(spec: str, secret_text: str) -> None:
    with pytest.raises(ValueError) as info:
        KeyRing.parse(spec)
    assert secret_text not in "".join(traceback.format_exception(info.value))


def test_key_ring_requires_keys_and_unique_kids() -> None:
    with pytest.raises(ValueError):
        KeyRing([])
    with pytest.raises(ValueError):
        KeyRing([key("k1", 1), key("k1", 2)])


def test_state_key_validates_kid_and_secret_length() -> None:
    for bad_kid in ("", "k.1", "k" * 17, "ké"):
        with pytest.raises(ValueError):
            StateKey(bad_kid, bytes(32))
    for length in (31, 33):
        with pytest.raises(ValueError):
            StateKey("k1", bytes(length))


def test_reprs_never_show_the_secret() -> None:
    secret = bytes(range(32))
    k = StateKey("k1", secret)
    ring = KeyRing([k])
    for text in (repr(k), str(k), repr(ring), str(ring), repr([ring, k])):
        assert b64(secret) not in text
        assert repr(secret) not in text
        assert secret.hex() not in text
        assert "\\x1f" not in text
    assert repr(k) == "StateKey(kid='k1', secret=<redacted>)"
    assert repr(ring) == "KeyRing(kids=['k1'])"


# --- key file ------------------------------------------------------------------------------


def test_key_file_is_created_owner_only_in_an_owner_only_directory(tmp_path: Path) -> None:
    path = tmp_path / "new-dir" / "state.key"
    ring = KeyRing.load_or_create_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(ring.keys) == 1
    assert sorted(os.listdir(path.parent)) == ["state.key"]


def test_key_file_second_call_returns_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "state.key"
    first = KeyRing.load_or_create_file(path)
    second = KeyRing.load_or_create_file(path)
    assert first.sealing_key == second.sealing_key
    token = StateSealer(first).seal(CLAIMS, 60)
    assert StateSealer(second).open(token)["tool"] == "delete_note"


def test_key_file_ignores_a_permissive_umask(tmp_path: Path) -> None:
    previous = os.umask(0o000)
    try:
        path = tmp_path / "d" / "state.key"
        KeyRing.load_or_create_file(path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_existing_parent_directory_mode_is_left_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    KeyRing.load_or_create_file(tmp_path / "state.key")
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755


def test_existing_multi_key_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "state.key"
    path.write_text(f"k2:{SECRET_B},k1:{SECRET_A}\n")
    path.chmod(0o600)
    ring = KeyRing.load_or_create_file(path)
    assert [k.kid for k in ring.keys] == ["k2", "k1"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_group_or_other_accessible_key_file_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "state.key"
    path.write_text(f"k1:{SECRET_A}\n")
    path.chmod(mode)
    with pytest.raises(ValueError) as info:
        KeyRing.load_or_create_file(path)
    assert SECRET_A not in str(info.value)
    assert path.read_text() == f"k1:{SECRET_A}\n"  # never silently replaced


def test_corrupt_key_file_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = tmp_path / "state.key"
    path.write_text(f"k1:{SECRET_A[:-2]}\n")
    path.chmod(0o600)
    with pytest.raises(ValueError) as info:
        KeyRing.load_or_create_file(path)
    assert SECRET_A[:-2] not in str(info.value)


def test_losing_the_creation_race_adopts_the_winners_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.key"
    winner = KeyRing.generate_spec()
    real_link = os.link

    def link_after_rival_wins(src: Any, dst: Any) -> None:
        fd = os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, winner.encode() + b"\n")
        os.close(fd)
        real_link(src, dst)

    monkeypatch.setattr(os, "link", link_after_rival_wins)
    ring = KeyRing.load_or_create_file(path)
    assert ring.sealing_key == KeyRing.parse(winner).sealing_key
    assert os.listdir(tmp_path) == ["state.key"]


_WORKER = textwrap.dedent(
    """
    import hashlib, sys
    from pathlib import Path
    from notes_server.security.keyring import KeyRing

    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: every worker is released by the same parent write
    key = KeyRing.load_or_create_file(Path(sys.argv[1])).sealing_key
    print(key.kid + ":" + hashlib.sha256(key.secret).hexdigest(), flush=True)
    """
)


def test_concurrent_processes_all_share_one_created_key(tmp_path: Path) -> None:
    path = tmp_path / "db" / "state.key"
    env = {**os.environ, "PYTHONPATH": str(Path(keyring.__file__).resolve().parents[2])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(8)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline() == "ready\n"
        for worker in workers:  # all are blocked on stdin; release them together
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [w.returncode for w in workers] == [0] * 8, [err for _, err in results]
    reports = {out.strip() for out, _ in results}
    assert len(reports) == 1
    kid, digest = reports.pop().split(":")
    expected = KeyRing.load_or_create_file(path).sealing_key
    assert (kid, digest) == (expected.kid, hashlib.sha256(expected.secret).hexdigest())
    assert os.listdir(path.parent) == ["state.key"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
