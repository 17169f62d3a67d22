"""`ClientChannel.ask` with a bound, on a real pipe (the descriptor `select` waits on): what
arrives during the wait is sorted as in an unbounded one, lines already read ahead into the
stream's buffer are not missed, and the wait ends with `Unanswered` or at the end of stdin."""

from __future__ import annotations

import io
import json
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import Any, BinaryIO

import pytest

from notes_server.compat_2025.channel import ClientChannel, Unanswered
from notes_server.compat_2025.roots import roots_request
from notes_server.transports.stdio import Frame, LineReader, LineWriter

WAIT_S = 0.2
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
LISTING = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}


class Pipe:
    """The client's end of a stdin pipe, and the channel reading the other end."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.stdin: BinaryIO = os.fdopen(read_fd, "rb")
        self.client: BinaryIO = os.fdopen(write_fd, "wb")
        self.stdout = io.BytesIO()
        self.backlog: deque[Frame] = deque()
        self.channel = ClientChannel(LineReader(self.stdin), LineWriter(self.stdout), self.backlog)

    def send(self, *messages: dict[str, Any]) -> None:
        """All in one write: after the first line, the rest sit in the reader's buffer."""
        self.client.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.client.flush()

    def written(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.getvalue().splitlines()]

    def close(self) -> None:
        for stream in (self.client, self.stdin):
            if not stream.closed:
                stream.close()


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    opened = Pipe()
    yield opened
    opened.close()


def test_an_unanswered_question_raises_after_the_wait_with_pings_answered_and_the_rest_queued(
    pipe: Pipe,
) -> None:
    pipe.send(PING, LISTING)
    began = time.monotonic()

    with pytest.raises(Unanswered):
        pipe.channel.ask(roots_request("s-1"), None, WAIT_S)

    assert time.monotonic() - began >= WAIT_S
    assert pipe.written() == [
        {"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"},
        {"jsonrpc": "2.0", "id": 7, "result": {}},
    ]
    assert [json.loads(frame) for frame in pipe.backlog if isinstance(frame, bytes)] == [LISTING]


def test_an_answer_read_ahead_behind_another_line_is_returned(pipe: Pipe) -> None:
    answer = {"jsonrpc": "2.0", "id": "s-1", "result": {"roots": []}}
    pipe.send(LISTING, answer)

    got = pipe.channel.ask(roots_request("s-1"), None, WAIT_S)

    assert got == answer
    assert [json.loads(frame) for frame in pipe.backlog if isinstance(frame, bytes)] == [LISTING]


def test_a_stale_answer_is_dropped_and_the_wait_still_runs_out(
    pipe: Pipe, caplog: pytest.LogCaptureFixture
) -> None:
    pipe.send({"jsonrpc": "2.0", "id": "s-0", "result": {"roots": []}})

    with caplog.at_level(logging.INFO, logger="notes_server.legacy"), pytest.raises(Unanswered):
        pipe.channel.ask(roots_request("s-1"), None, WAIT_S)

    assert list(pipe.backlog) == []
    assert pipe.written() == [{"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"}]
    assert caplog.messages == ["dropped a response to an unknown or abandoned request"]


def test_the_end_of_stdin_during_a_bounded_wait_returns_no_answer(pipe: Pipe) -> None:
    pipe.send(LISTING)
    pipe.client.close()

    got = pipe.channel.ask(roots_request("s-1"), None, 30.0)

    assert got is None
    assert [json.loads(frame) for frame in pipe.backlog if isinstance(frame, bytes)] == [LISTING]
