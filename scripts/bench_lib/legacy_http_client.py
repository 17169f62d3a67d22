"""One 2025-11-25 HTTP session client for the `legacy-http` load curve. Stdlib only; run as a
separate process per session.

Usage: legacy_http_client.py PORT PATH SECONDS START_AT WORKSPACE TAG
  -> prints {"iterations", "elapsed", "lat": {"create": [...], "read": [...], "delete": [...]}}
With NOTES_BENCH_TOKEN set, every request carries `Authorization: Bearer $NOTES_BENCH_TOKEN`.

The session opens as a 2025-era client does (`initialize`, then `notifications/initialized`,
then `Mcp-Session-Id` and `MCP-Protocol-Version` on every request), then loops, lock-step:
`notes_create` of a note with a title only this client uses, `notes_read` of it, and
`notes_delete` of it by title: that POST's reply is an SSE stream whose first message is the
server's `elicitation/create`; the client answers it (accept, the one offered note, confirm) by
POSTing the JSON-RPC response on a second keep-alive connection (202), and the final result
arrives on the stream. Every outcome is checked (the note read back, the one choice offered,
the note reported deleted, the stream ended); anything else stops the client with an error.

A reply is read straight off the socket: Content-Length or chunked bodies, `application/json`
or `text/event-stream`, whichever the server sends (the SDK answers every POST of a session
with SSE, notes-server only the ones that ask a question). Both servers get the same client.
"""

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

VERSION = "2025-11-25"
IDLE_S = 4.0  # reconnect rather than reuse a connection idle this long


class Connection:
    """One keep-alive HTTP/1.1 connection, read by hand."""

    def __init__(self, port: int, head: str) -> None:
        self.port = port
        self.head = head
        self.connect()

    def connect(self) -> None:
        """A fresh socket: both servers close keep-alive connections idle for 5 s."""
        if hasattr(self, "sock"):
            self.sock.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.used = time.monotonic()

    def post(self, extra_headers: str, body: bytes) -> tuple[int, dict[bytes, bytes]]:
        """Send one POST; (status, lower-cased headers) of its reply, the body left to read."""
        now = time.monotonic()
        if now - self.used > IDLE_S:  # as an HTTP client's pool does, before the server would
            self.connect()
        self.used = now
        self.sock.sendall(
            (f"{self.head}{extra_headers}Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
            + body
        )
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return int(lines[0][9:12]), headers

    def chunks(self, headers: dict[bytes, bytes]) -> Iterator[bytes]:
        """The reply's body as it arrives (whole for Content-Length, chunk by chunk otherwise)."""
        if b"content-length" in headers:
            yield self._exact(int(headers[b"content-length"]))
            return
        if headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            raise SystemExit(f"reply with neither Content-Length nor chunks: {headers!r}")
        while True:
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                while self._line():  # trailers, then the empty line
                    pass
                return
            data = self._exact(size)
            self._exact(2)
            yield data

    def drain(self, headers: dict[bytes, bytes]) -> None:
        """Read and drop a body, if the reply has one (a 202 usually has none)."""
        if b"content-length" in headers or b"transfer-encoding" in headers:
            for _ in self.chunks(headers):
                pass

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        self.buffer += chunk
        self.used = time.monotonic()


def messages(conn: Connection, headers: dict[bytes, bytes]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of one reply: its JSON body, or the data of each SSE event."""
    kind = headers.get(b"content-type", b"")
    if kind.startswith(b"application/json"):
        yield json.loads(b"".join(conn.chunks(headers)))
        return
    if not kind.startswith(b"text/event-stream"):
        raise SystemExit(f"unexpected content type {kind!r}")
    pending = b""
    for chunk in conn.chunks(headers):
        pending = (pending + chunk).replace(b"\r\n", b"\n")
        while b"\n\n" in pending:
            event, _, pending = pending.partition(b"\n\n")
            data = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if data and any(data):  # comments and empty priming events carry no message
                yield json.loads(b"\n".join(data))


class Session:
    def __init__(self, port: int, path: str, token: str | None) -> None:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{auth}"
        )
        self.main = Connection(port, head)
        self.answers = Connection(port, head)
        self.extra = ""
        self.ids = 0

    def send(self, conn: Connection, message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        status, headers = conn.post(self.extra, json.dumps(message).encode())
        if status == 202:
            conn.drain(headers)
            return iter(())
        if status != 200:
            body = b"".join(conn.chunks(headers))
            raise SystemExit(f"HTTP {status} for {message.get('method')}: {body[:300]!r}")
        if "method" in message and "id" not in message:
            raise SystemExit(f"HTTP 200 for a notification: {headers!r}")
        return messages(conn, headers)

    def open(self) -> None:
        self.ids += 1
        params = {
            "protocolVersion": VERSION,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "notes-bench-legacy", "version": "1"},
        }
        message = {"jsonrpc": "2.0", "id": self.ids, "method": "initialize", "params": params}
        status, headers = self.main.post("", json.dumps(message).encode())
        if status != 200 or b"mcp-session-id" not in headers:
            raise SystemExit(f"initialize: HTTP {status} {headers!r}")
        session = headers[b"mcp-session-id"].decode()
        reply = final(messages(self.main, headers), self.ids)
        if reply["protocolVersion"] != VERSION:
            raise SystemExit(f"negotiated {reply['protocolVersion']!r}")
        self.extra = f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {VERSION}\r\n"
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, headers = self.main.post(self.extra, json.dumps(done).encode())
        if status != 202:
            raise SystemExit(f"notifications/initialized: HTTP {status}")
        self.main.drain(headers)

    def call(self, name: str, arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
        self.ids += 1
        params = {"name": name, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}
        return self.send(self.main, message)

    def answer(self, question: dict[str, Any], result: dict[str, Any]) -> None:
        reply = {"jsonrpc": "2.0", "id": question["id"], "result": result}
        status, headers = self.answers.post(self.extra, json.dumps(reply).encode())
        if status != 202:
            body = b"".join(self.answers.chunks(headers))
            raise SystemExit(f"answer: HTTP {status} {body[:300]!r}")
        self.answers.drain(headers)


def final(stream: Iterator[dict[str, Any]], request_id: int) -> Any:
    """The result for `request_id`, the stream read to its end; anything else is an error."""
    found = [m for m in stream if m.get("id") == request_id]
    if len(found) != 1 or "result" not in found[0]:
        raise SystemExit(f"request {request_id}: {found!r:.300}")
    result = found[0]["result"]
    if isinstance(result, dict) and result.get("isError"):
        raise SystemExit(f"request {request_id}: tool error {result!r:.300}")
    return result


def iteration(session: Session, workspace: str, title: str) -> tuple[float, float, float]:
    """Create, read and delete (confirmed) one note; the three latencies in µs."""
    clock = time.perf_counter_ns
    t0 = clock()
    create = {"workspaceUri": workspace, "title": title}
    created = final(session.call("notes_create", create), session.ids)
    t1 = clock()
    note_id = created["structuredContent"]["note"]["id"]
    read_args = {"workspaceUri": workspace, "noteId": note_id}
    read = final(session.call("notes_read", read_args), session.ids)
    t2 = clock()
    if read["structuredContent"]["note"]["title"] != title:
        raise SystemExit(f"read back {read!r:.300}")
    stream = session.call("notes_delete", {"workspaceUri": workspace, "title": title})
    call_id = session.ids
    question = next(stream)
    if question.get("method") != "elicitation/create":
        raise SystemExit(f"expected elicitation/create, got {question!r:.300}")
    offered = question["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    if [choice["const"] for choice in offered] != [note_id]:
        raise SystemExit(f"offered {offered!r:.300} for {note_id}")
    session.answer(question, {"action": "accept", "content": {"note_id": note_id, "confirm": True}})
    outcome = final(stream, call_id)["structuredContent"]
    t3 = clock()
    if outcome.get("deleted") is not True or outcome.get("noteId") != note_id:
        raise SystemExit(f"delete outcome {outcome!r:.300}")
    return (t1 - t0) / 1000, (t2 - t1) / 1000, (t3 - t2) / 1000


def main() -> None:
    port, path, seconds, start_at, workspace, tag = sys.argv[1:7]
    session = Session(int(port), path, os.environ.get("NOTES_BENCH_TOKEN"))
    session.open()
    iteration(session, workspace, f"legacy bench {tag} warm-up")
    while time.time() < float(start_at):
        time.sleep(0.001)
    # The wait for the others can outlast the servers' keep-alive timeout; the session lives
    # in its header, not in a connection.
    session.main.connect()
    session.answers.connect()
    lat: dict[str, list[float]] = {"create": [], "read": [], "delete": []}
    started = time.perf_counter()
    deadline = started + float(seconds)
    i = 0
    now = started
    while now < deadline:
        create, read, delete = iteration(session, workspace, f"legacy bench {tag} {i}")
        lat["create"].append(create)
        lat["read"].append(read)
        lat["delete"].append(delete)
        i += 1
        now = time.perf_counter()
    print(json.dumps({"iterations": i, "elapsed": now - started, "lat": lat}))


if __name__ == "__main__":
    main()
