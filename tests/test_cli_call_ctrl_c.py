"""Ctrl-C at `notes-server call`'s terminal form (a real `call` process on a pseudo-terminal,
a real SIGINT): the open form is answered with `cancel` (recorded as the tool records a
cancel: `notes_delete` consumes and audits nothing), nothing changes, and the exit status is
130, not click's `Aborted!` and 1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import default_db_url, subprocess_env
from tests.test_cli_call import NEWER, OLDER, TITLE, audit_outcomes, counts, delete_args, prepare

WAIT_S = 60  # a safety net against a hung child, not a timing assertion

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")


class TerminalCall:
    """`notes-server call` with a terminal on stdin and its stderr read as it comes."""

    def __init__(self, tmp_path: Path, *argv: str) -> None:
        self.leader, follower = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notes_server", "call", *argv],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(tmp_path),
            cwd=tmp_path,
        )
        os.close(follower)
        self.seen = b""

    def wait_for(self, text: str) -> None:
        assert self.proc.stderr is not None
        while text.encode() not in self.seen:
            chunk = os.read(self.proc.stderr.fileno(), 65536)
            assert chunk, f"exited {self.proc.wait(WAIT_S)}: {self.seen!r}"
            self.seen += chunk

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=WAIT_S)
        return self.proc.returncode, out.decode(), (self.seen + err).decode()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.leader)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return default_db_url(tmp_path)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[list[TerminalCall]]:
    started: list[TerminalCall] = []
    yield started
    for call in started:
        call.close()


@pytest.mark.parametrize("prompt", ["Note: ", "Yes, permanently delete this note [y/n]: "])
def test_ctrl_c_at_the_form_cancels_it_and_exits_130(
    tmp_path: Path, url: str, terminal: list[TerminalCall], prompt: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER), (TITLE, "b.md", NEWER))
    call = TerminalCall(tmp_path, *delete_args(url))
    terminal.append(call)
    if prompt != "Note: ":
        call.wait_for("Note: ")
        os.write(call.leader, b"1\n")
    call.wait_for(prompt)

    call.proc.send_signal(signal.SIGINT)
    status, out, err = call.finish()

    assert status == 130, err
    assert out == ""
    assert "Aborted!" not in err and "Traceback" not in err
    assert "Cancelled.\n" in err
    assert json.loads(err.rsplit("Cancelled.\n", 1)[1].splitlines()[0]) == {
        "deleted": False,
        "outcome": "cancelled",
    }
    assert counts(url) == (2, 0, 0)  # nothing deleted, no nonce consumed, no audit row
    assert audit_outcomes(url) == []


def test_end_of_input_at_the_form_cancels_it_and_says_so(
    tmp_path: Path, url: str, terminal: list[TerminalCall]
) -> None:
    prepare(url, (TITLE, "a.md", OLDER))
    call = TerminalCall(tmp_path, *delete_args(url))
    terminal.append(call)
    call.wait_for("Note: ")

    os.write(call.leader, b"\x04")  # Ctrl-D: end of input
    status, out, err = call.finish()

    assert status == 1
    assert out == ""
    assert "Error: the terminal closed before the form was answered" in err
    assert '{"deleted": false, "outcome": "cancelled"}' in err
    assert counts(url) == (1, 0, 0)


HELD = Path(__file__).resolve().parent / "fixtures" / "held_server"


@pytest.mark.parametrize(
    ("held_call", "answers", "outcome", "after"),
    [
        (1, (), {"deleted": False, "outcome": "cancelled"}, (1, 0, 0)),
        (2, ("--answer", "note_id=1", "--answer", "confirm=y"), None, (0, 1, 1)),
    ],
    ids=["round-1-opens-a-form-that-is-cancelled", "round-2-finishes-and-is-reported"],
)
def test_ctrl_c_while_the_server_works_on_a_round_waits_for_its_answer(
    tmp_path: Path,
    url: str,
    held_call: int,
    answers: tuple[str, ...],
    outcome: dict[str, object] | None,
    after: tuple[int, int, int],
) -> None:
    [note] = prepare(url, (TITLE, "a.md", OLDER))
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = {
        "PYTHONPATH": str(HELD),
        "NOTES_TEST_HOLD_FIFO": str(gate),
        "NOTES_TEST_HOLD_CALL": str(held_call),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "notes_server", "call", *delete_args(url, *answers)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(tmp_path, env),
        cwd=tmp_path,
        text=True,
    )
    try:
        opened: list[int] = []
        opener = threading.Thread(target=lambda: opened.append(os.open(gate, os.O_WRONLY)))
        opener.start()
        opener.join(WAIT_S)  # returns once the server holds the round (it opened the FIFO)
        assert opened, "the server never reached the held round"

        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        seen = ""
        while "Cancelling..." not in seen:
            line = proc.stderr.readline()
            assert line, seen
            seen += line
        os.write(opened[0], b"go")
        os.close(opened[0])
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 130, seen + err
    assert "Traceback" not in seen + err
    if outcome is None:  # the round finished: its result is printed, nothing is lost
        assert json.loads(out)["noteId"] == note.id
    else:
        assert out == ""
        assert f"Cancelled.\n{json.dumps(outcome)}" in seen + err
    assert counts(url) == after
