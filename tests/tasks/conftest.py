"""A server whose Tasks extension runs on a runner the test holds (to wait for its tasks), on
a clock the test moves (to expire them), and a granted workspace mirroring 50 markdown files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.app import builtin_extensions, create_server
from notes_server.config import Settings
from notes_server.features.extension import Extension
from notes_server.features.tasks.extension import tasks_extension
from notes_server.features.tasks.runner import TaskRunner
from notes_server.protocol.server import McpServer
from notes_server.store import folders
from notes_server.store.engine import write_tx
from notes_server.tools.services import Services, utc_now
from tests.helpers import make_request

NOTES = "file:///home/alice/notes"
FILES = 50
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
WAIT_S = 60  # a safety net against a hung task, never a timing assertion
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def body(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply's result without its `_meta` (which must name the server), or fail on an error."""
    assert "error" not in reply, reply
    result: dict[str, Any] = dict(reply["result"])
    assert SERVER_INFO in result.pop("_meta")
    return result


class Clock:
    """Aware UTC that moves only when the test says so."""

    def __init__(self) -> None:
        self.now: datetime = utc_now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def task_services(settings: Settings, migrated_engine: Engine, clock: Clock) -> Services:
    return Services(settings, engine=migrated_engine, clock=clock)


@pytest.fixture
def runner(task_services: Services) -> Iterator[TaskRunner]:
    runner = TaskRunner(task_services)
    yield runner
    runner.join_all(WAIT_S)


def with_runner(services: Services, runner: TaskRunner, *extra: Extension) -> list[Extension]:
    """The built-in extensions, the Tasks one on `runner`, then `extra`."""
    served = [e for e in builtin_extensions(services) if e.name != "tasks"]
    return [*served, tasks_extension(services, runner=runner), *extra]


@pytest.fixture
def task_server(settings: Settings, task_services: Services, runner: TaskRunner) -> McpServer:
    return create_server(settings, task_services, with_runner(task_services, runner))


Rpc = Callable[..., dict[str, Any]]


def rpc_on(server: McpServer) -> Rpc:
    def rpc(
        method: str,
        params: dict[str, Any] | None = None,
        *,
        principal: str = "alice",
        caps: dict[str, Any] | None = TASKS,
    ) -> dict[str, Any]:
        raw = server.handle_raw(json.dumps(make_request(method, params, caps=caps)), principal)
        assert raw is not None
        reply: dict[str, Any] = json.loads(raw)
        return reply

    return rpc


@pytest.fixture
def rpc(task_server: McpServer) -> Rpc:
    """rpc(method, params, *, principal="alice", caps=TASKS) -> the parsed reply."""
    return rpc_on(task_server)


def write_vault(folder: Path, files: int = FILES) -> Path:
    folder.mkdir()
    for n in range(files):
        (folder / f"n{n:02d}.md").write_text(f"# Note {n}\n\nbody {n}\n", "utf-8")
    return folder


@pytest.fixture
def vault(tmp_path: Path, migrated_engine: Engine, grant: Callable[..., str]) -> Path:
    """50 markdown files mirrored for alice's granted workspace."""
    grant("alice", NOTES)
    folder = write_vault(tmp_path / "vault")
    with write_tx(migrated_engine) as conn:
        folders.set_mirror(conn, "alice", NOTES, str(folder), utc_now())
    return folder
