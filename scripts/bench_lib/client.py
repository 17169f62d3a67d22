"""Client loops over stdio: lock-step, pipelined, and many confirmed deletes multiplexed.

The client is the same code for every implementation, so its own cost cancels out of the ratios.
Replies are parsed after the timed window (a sample of them), never inside it.
"""

from __future__ import annotations

import json
import os
import selectors
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_lib.common import WORKSPACE, StdioServer, check_reply, cpu_seconds, tool_call


@dataclass
class LockstepResult:
    count: int
    elapsed_s: float
    latencies_us: list[float]
    server_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.count / self.elapsed_s


def lockstep(
    server: StdioServer, payloads: Sequence[bytes], *, seconds: float, max_count: int = 10**7
) -> LockstepResult:
    """Send one request, wait for its reply, repeat, for `seconds` (cycling `payloads`)."""
    write, flush, readline = server.stdin.write, server.stdin.flush, server.stdout.readline
    clock = time.perf_counter_ns
    latencies: list[int] = []
    sampled: list[tuple[bytes, bytes]] = []
    n = len(payloads)
    cpu_before = cpu_seconds(server.pid)
    started = clock()
    deadline = started + int(seconds * 1e9)
    i = 0
    now = started
    while now < deadline and i < max_count:
        payload = payloads[i % n]
        t0 = clock()
        write(payload)
        flush()
        line = readline()
        now = clock()
        latencies.append(now - t0)
        if not line:
            raise RuntimeError(f"server closed stdout; see {server.log}")
        if i % 97 == 0:
            sampled.append((payload, line))
        i += 1
    elapsed = (now - started) / 1e9
    server_cpu = cpu_seconds(server.pid) - cpu_before
    for payload, line in sampled:
        check_reply(line, expect_id=json.loads(payload)["id"])
    return LockstepResult(i, elapsed, [x / 1000 for x in latencies], server_cpu)


def pipelined(server: StdioServer, payloads: Sequence[bytes]) -> float:
    """Write all requests from a thread while reading replies; return elapsed seconds."""
    blob = b"".join(payloads)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            server.stdin.write(blob)
            server.stdin.flush()
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    readline = server.stdout.readline
    lines: list[bytes] = []
    started = time.perf_counter()
    thread = threading.Thread(target=writer)
    thread.start()
    for _ in payloads:
        lines.append(readline())
    elapsed = time.perf_counter() - started
    thread.join()
    if errors:
        raise errors[0]
    ids = set()
    for line in lines:
        ids.add(check_reply(line)["id"])
    if len(ids) != len(payloads):
        raise RuntimeError(f"{len(payloads)} requests got {len(ids)} distinct replies")
    return elapsed


# -- confirmed deletes, many servers, one single-threaded client --------------------------------


def delete_round1(request_id: int, title: str) -> bytes:
    return tool_call(request_id, "notes_delete", {"workspaceUri": WORKSPACE, "title": title})


def delete_round2(request_id: int, title: str, round1: dict[str, Any]) -> bytes:
    result = round1["result"]
    if result.get("resultType") != "input_required":
        raise RuntimeError(f"round 1 did not ask: {json.dumps(result)[:300]}")
    key, ask = next(iter(result["inputRequests"].items()))
    choice = ask["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"][0]["const"]
    answer = {"action": "accept", "content": {"note_id": choice, "confirm": True}}
    return tool_call(
        request_id,
        "notes_delete",
        {"workspaceUri": WORKSPACE, "title": title},
        inputResponses={key: answer},
        requestState=result["requestState"],
    )


@dataclass
class _Lane:
    server: StdioServer
    titles: list[str]
    fd: int
    buffer: bytearray = field(default_factory=bytearray)
    next_title: int = 0
    phase: int = 0  # 0 idle, 1 waiting for round 1, 2 waiting for round 2
    started_ns: int = 0
    request_id: int = 0
    done: int = 0
    latencies_us: list[float] = field(default_factory=list)
    deleted_ids: list[str] = field(default_factory=list)


@dataclass
class DeleteRun:
    deletes: int
    elapsed_s: float
    latencies_us: list[float]
    deleted_ids: list[str]

    @property
    def rate(self) -> float:
        return self.deletes / self.elapsed_s


def confirmed_deletes(
    servers: Sequence[StdioServer],
    titles: Sequence[Sequence[str]],
    *,
    seconds: float,
    on_start: Callable[[], None] | None = None,
) -> DeleteRun:
    """Each server gets one client lane deleting its own titles (round 1, round 2, next) until
    `seconds` have passed or its titles run out. Every delete is checked for `deleted: true`."""
    selector = selectors.DefaultSelector()
    lanes = []
    for server, own in zip(servers, titles, strict=True):
        fd = server.stdout.fileno()
        os.set_blocking(fd, False)
        lane = _Lane(server, list(own), fd)
        lanes.append(lane)
        selector.register(fd, selectors.EVENT_READ, lane)
    clock = time.perf_counter_ns

    def start_next(lane: _Lane) -> None:
        if lane.next_title >= len(lane.titles) or clock() >= deadline:
            lane.phase = 0
            return
        lane.request_id += 1
        lane.started_ns = clock()
        lane.server.send(delete_round1(lane.request_id, lane.titles[lane.next_title]))
        lane.phase = 1

    if on_start is not None:
        on_start()
    started = clock()
    deadline = started + int(seconds * 1e9)
    for lane in lanes:
        start_next(lane)
    active = sum(1 for lane in lanes if lane.phase)
    while active:
        for key, _ in selector.select(timeout=30):
            lane = key.data
            chunk = os.read(lane.fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"server closed stdout; see {lane.server.log}")
            lane.buffer += chunk
            while (newline := lane.buffer.find(b"\n")) >= 0:
                line = bytes(lane.buffer[: newline + 1])
                del lane.buffer[: newline + 1]
                reply = check_reply(line, expect_id=lane.request_id)
                title = lane.titles[lane.next_title]
                lane.request_id += 1
                if lane.phase == 1:
                    lane.server.send(delete_round2(lane.request_id, title, reply))
                    lane.phase = 2
                    continue
                structured = reply["result"].get("structuredContent") or {}
                if structured.get("deleted") is not True:
                    raise RuntimeError(f"delete not confirmed: {line[:300]!r}")
                lane.latencies_us.append((clock() - lane.started_ns) / 1000)
                lane.deleted_ids.append(structured["noteId"])
                lane.done += 1
                lane.next_title += 1
                start_next(lane)
                if not lane.phase:
                    active -= 1
    elapsed = (clock() - started) / 1e9
    for lane in lanes:
        selector.unregister(lane.fd)
        os.set_blocking(lane.fd, True)
        lane.titles = lane.titles[lane.next_title :]
    selector.close()
    return DeleteRun(
        sum(lane.done for lane in lanes),
        elapsed,
        [x for lane in lanes for x in lane.latencies_us],
        [x for lane in lanes for x in lane.deleted_ids],
    )
