"""notes_purge run as a task (the request declares the Tasks extension), over HTTP in process:
the URL elicitation of round 1 is the task's `inputRequests`; after the approval page is
completed, `tasks/update` with accept purges exactly the approved set; accepted before the page
is completed, the task asks again under a new key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import builtin_extensions, create_http_app, page_base
from notes_server.config import HttpSettings, Settings
from notes_server.features.tasks.extension import tasks_extension
from notes_server.features.tasks.runner import TaskRunner
from notes_server.store.engine import read_tx
from notes_server.tools.services import Services
from tests.approval.purge_support import URL_CAPS, WS, add_note, approve, post_mcp
from tests.transports.http_support import LOOPBACK_URL, rpc

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CAPS = {**URL_CAPS, **TASKS}
WAIT_S = 60  # a safety net against a hung task, never a timing assertion


@pytest.fixture
def runner(settings: Settings, services: Services) -> Iterator[TaskRunner]:
    runner = TaskRunner(Services(settings, engine=services.engine))
    yield runner
    runner.join_all(WAIT_S)


@pytest.fixture
def task_client(settings: Settings, services: Services, runner: TaskRunner) -> Iterator[TestClient]:
    http = HttpSettings()
    base = page_base(http)
    assert base is not None
    own = Services(settings, engine=services.engine)
    extensions = [
        tasks_extension(own, runner=runner) if e.name == "tasks" else e
        for e in builtin_extensions(own, page_base=lambda: base)
    ]
    with TestClient(create_http_app(settings, http, own, extensions), base_url=LOOPBACK_URL) as c:
        yield c


def task_rpc(client: TestClient, token: str, method: str, params: dict[str, Any]) -> Any:
    body, headers = rpc(method, params, caps=CAPS)
    headers["Authorization"] = f"Bearer {token}"
    headers["Mcp-Name"] = params["taskId"]  # the extension's routing header
    response = client.post("/mcp", content=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def start(client: TestClient, token: str, runner: TaskRunner) -> dict[str, Any]:
    params = {"name": "notes_purge", "arguments": {"workspaceUri": WS}}
    created = post_mcp(client, token, params, CAPS).json()["result"]
    assert created["resultType"] == "task", created
    assert runner.wait_for_input(created["taskId"], WAIT_S)
    waiting: dict[str, Any] = task_rpc(client, token, "tasks/get", {"taskId": created["taskId"]})
    return waiting


def test_an_approved_purge_task_purges_exactly_the_bound_set(
    task_client: TestClient,
    browser: TestClient,
    alice: str,
    migrated_engine: Engine,
    runner: TaskRunner,
) -> None:
    browser = TestClient(task_client.app, base_url=LOOPBACK_URL)
    old = [add_note(migrated_engine, f"old{i}.md", f"Old {i}", archived=True) for i in range(2)]
    live = add_note(migrated_engine, "live.md", "Live", archived=False)
    waiting = start(task_client, alice, runner)
    task_id = waiting["taskId"]
    (key,) = waiting["inputRequests"]
    url = waiting["inputRequests"][key]["params"]["url"]

    approved = approve(browser, url, alice)
    task_rpc(
        task_client,
        alice,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {key: {"action": "accept"}}},
    )
    assert runner.join(task_id, WAIT_S)
    done = task_rpc(task_client, alice, "tasks/get", {"taskId": task_id})

    assert waiting["status"] == "input_required"
    assert key == "purge_approval"
    assert waiting["inputRequests"][key]["params"]["mode"] == "url"
    assert approved.status_code == 200 and "Purge approved" in approved.text
    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    assert structured["outcome"] == "purged"
    assert sorted(structured["purgedIds"]) == sorted(note.id for note in old)
    with read_tx(migrated_engine) as conn:
        ids = set(conn.execute(text("SELECT id FROM notes")).scalars())
    assert ids == {live.id}


def test_accepted_before_the_page_is_completed_the_task_asks_again_under_a_new_key(
    task_client: TestClient, alice: str, migrated_engine: Engine, runner: TaskRunner
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    waiting = start(task_client, alice, runner)
    task_id = waiting["taskId"]
    first_url = waiting["inputRequests"]["purge_approval"]["params"]["url"]

    answer = {"purge_approval": {"action": "accept"}}
    task_rpc(task_client, alice, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert runner.wait_for_input(task_id, WAIT_S, round_no=2)
    again = task_rpc(task_client, alice, "tasks/get", {"taskId": task_id})
    task_rpc(task_client, alice, "tasks/cancel", {"taskId": task_id})
    assert runner.join(task_id, WAIT_S)

    assert list(again["inputRequests"]) == ["purge_approval.2"]
    assert again["inputRequests"]["purge_approval.2"]["params"]["url"] == first_url
    with read_tx(migrated_engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 1
