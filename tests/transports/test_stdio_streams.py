"""`StdioStreams` with a stream the server ends (its reader fell behind): the notifications
queued before, then `notifications/cancelled` and the closing result, each a whole line;
a client's cancellation writes nothing more."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

from notes_server.transports.stdio import LineWriter, StdioStreams


class FakeStream:
    def __init__(self, queued: list[bytes], *, dropped: bool) -> None:
        self.queued = queued
        self.dropped = dropped
        self.ended = threading.Event()
        self.closed = False

    def attach(self, wake: Callable[[], None]) -> None:
        wake()

    def drain(self) -> tuple[list[bytes], bool]:
        taken, self.queued = self.queued, []
        return taken, True

    def close(self) -> None:
        self.closed = True

    def final(self) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": "l", "result": {}}).encode()

    def cancelled(self, reason: str) -> bytes:
        params = {"requestId": "l", "reason": reason}
        return json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        ).encode()


def written(stream: FakeStream) -> list[dict[str, Any]]:
    out = io.BytesIO()
    streams = StdioStreams(server=None, principal="alice", writer=LineWriter(out))  # type: ignore[arg-type]
    streams.adopt("one", stream)  # type: ignore[arg-type]
    streams.close()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_dropped_stream_ends_with_cancelled_then_its_closing_result() -> None:
    lines = written(FakeStream([b'{"jsonrpc":"2.0","method":"notifications/x"}'], dropped=True))

    assert [line.get("method", "result") for line in lines] == [
        "notifications/x",
        "notifications/cancelled",
        "result",
    ]
    assert lines[1]["params"]["requestId"] == "l"


def test_a_stream_closed_by_the_client_writes_nothing_more() -> None:
    lines = written(FakeStream([b'{"jsonrpc":"2.0","method":"notifications/x"}'], dropped=False))

    assert [line["method"] for line in lines] == ["notifications/x"]
