"""Real `serve --transport http` processes: start-up refusals, a confirmation asked by one
process and answered by another (shared database and state keys), `--workers 2`, and the
per-request timeout."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import (
    HttpSettings,
    Settings,
    export_worker_config,
    worker_config,
)
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.server import (
    StartupError,
    prepare,
    startup_problem,
)
from tests.helpers import subprocess_env
from tests.transports.http_support import (
    LOOPBACK_URL,
    HttpServer,
    SlowTool,
    rpc,
    serve_command,
    start_http_server,
)

WS = "file:///home/alice/notes"
FORM = {"elicitation": {"form": {}}}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[HttpServer]]:
    started: list[HttpServer] = []
    yield started
    for server in started:
        server.stop()


def post(server: HttpServer, method: str, params: Any, token: str, **kw: Any) -> dict[str, Any]:
    body, headers = rpc(method, params, **kw)
    headers["Authorization"] = f"Bearer {token}"
    response = httpx.post(f"{server.url}/mcp", content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def delete_round_one(server: HttpServer, token: str) -> tuple[str, str]:
    """Ask to delete the note titled 'Plan'; returns (offered note id, requestState)."""
    args = {"workspaceUri": WS, "title": "Plan"}
    reply = post(
        server, "tools/call", {"name": "notes_delete", "arguments": args}, token, caps=FORM
    )
    result = reply["result"]
    assert result["resultType"] == "input_required"
    form = result["inputRequests"]["delete_choice"]["params"]["requestedSchema"]
    return form["properties"]["note_id"]["oneOf"][0]["const"], result["requestState"]


def delete_round_two(server: HttpServer, token: str, note_id: str, state: str) -> dict[str, Any]:
    params = {
        "name": "notes_delete",
        "arguments": {"workspaceUri": WS, "title": "Plan"},
        "inputResponses": {
            "delete_choice": {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
        },
        "requestState": state,
    }
    reply = post(server, "tools/call", params, token, caps=FORM, id=2)
    structured: dict[str, Any] = reply["result"]["structuredContent"]
    return structured


def create_plan(server: HttpServer, token: str) -> None:
    args = {"workspaceUri": WS, "title": "Plan", "path": "plan.md"}
    reply = post(server, "tools/call", {"name": "notes_create", "arguments": args}, token)
    assert reply["result"]["isError"] is False


def test_a_confirmation_asked_by_one_process_is_answered_by_another(
    tmp_path: Path,
    settings: Settings,
    migrated_engine: Engine,
    grant: Callable[..., str],
    servers: list[HttpServer],
) -> None:
    grant("alice", WS)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    first = start_http_server(tmp_path, settings.db_url)
    servers.append(first)
    second = start_http_server(tmp_path, settings.db_url)
    servers.append(second)
    create_plan(first, token)

    note_id, state = delete_round_one(first, token)
    outcome = delete_round_two(second, token, note_id, state)
    replayed = delete_round_two(first, token, note_id, state)

    assert outcome == {
        "deleted": True,
        "outcome": "deleted",
        "noteId": note_id,
        "title": "Plan",
        "uri": f"{WS}/plan.md",
    }
    assert replayed == outcome  # the nonce was claimed once, in the shared database
    if settings.database.is_sqlite:  # the processes shared the key file beside the database
        assert (tmp_path / "notes.db.state-keys").exists()


def test_two_workers_serve_a_whole_confirmation(
    tmp_path: Path,
    settings: Settings,
    migrated_engine: Engine,
    grant: Callable[..., str],
    servers: list[HttpServer],
) -> None:
    grant("alice", WS)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    server = start_http_server(tmp_path, settings.db_url, workers=2)
    servers.append(server)
    create_plan(server, token)

    note_id, state = delete_round_one(server, token)
    outcome = delete_round_two(server, token, note_id, state)
    discovers = [post(server, "server/discover", None, token, id=n) for n in range(10)]

    assert outcome["outcome"] == "deleted"
    assert all(reply["result"]["resultType"] == "complete" for reply in discovers)
    assert server.stderr_text().count("Started server process") == 2


def refused(tmp_path: Path, db_url: str, *args: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(
        serve_command(db_url, *args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=subprocess_env(tmp_path, env),
    )
    assert completed.returncode == 2
    assert "Uvicorn running" not in completed.stderr
    assert completed.stderr.startswith("notes-server: error: ")
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr
    return completed.stderr


def test_auth_none_is_refused_on_a_non_loopback_host(tmp_path: Path, settings: Settings) -> None:
    stderr = refused(tmp_path, settings.db_url, "--auth", "none", "--host", "0.0.0.0")

    assert "--auth none is only allowed on a loopback host" in stderr


def test_a_server_database_without_state_keys_is_refused(tmp_path: Path) -> None:
    stderr = refused(tmp_path, "postgresql://notes:hunter2@db.internal/notes")

    assert "NOTES_SERVER_STATE_KEYS must be set" in stderr
    assert "hunter2" not in stderr


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"auth": "none", "host": "0.0.0.0"}, "--auth none is only allowed on a loopback host"),
        ({"jwt_issuer": "https://i.example"}, "must be given together"),
        ({"workers": 0}, "--workers must be at least 1"),
        ({"public_url": "ftp://notes.example"}, "--public-url must be an http(s) URL"),
        ({"public_url": 'https://a"b'}, "--public-url must be an http(s) URL"),
        ({"jwt_issuer": "i", "jwt_audience": "a", "jwt_jwks": "f", "auth": "none"}, "--auth token"),
    ],
)
def test_unsafe_configurations_are_named(
    settings: Settings, changes: dict[str, Any], problem: str
) -> None:
    message = startup_problem(settings, HttpSettings(**changes))

    assert message is not None and problem in message


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
@pytest.mark.sqlite_only("without keys, HTTP uses the key file beside a SQLite database")
def test_auth_none_is_allowed_on_loopback(settings: Settings, host: str) -> None:
    no_keys = dataclasses.replace(settings, state_keys=None)

    assert startup_problem(no_keys, HttpSettings(auth="none", host=host)) is None


def test_workers_rebuild_the_parent_settings_from_the_environment(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notes_server import config

    http = HttpSettings(port=0, workers=2, allowed_origins=("https://app.example",))
    monkeypatch.setenv(config.ENV_STATE_KEYS, settings.state_keys or "")
    monkeypatch.delenv(config.ENV_WORKER_CONFIG, raising=False)
    export_worker_config(dataclasses.replace(settings, tools_modules=("a", "b")), http)
    payload = json.loads(os.environ[config.ENV_WORKER_CONFIG])
    monkeypatch.setenv(config.ENV_WORKER_CONFIG, json.dumps(payload))

    assert worker_config() == (dataclasses.replace(settings, tools_modules=("a", "b")), http)
    assert settings.state_keys not in json.dumps(payload)


def test_a_stuck_handler_is_answered_with_503_when_the_request_times_out(
    settings: Settings, services: Services
) -> None:
    settings = dataclasses.replace(settings, tools_modules=("tests.transports.http_support",))
    app = create_http_app(
        settings,
        HttpSettings(auth="none", request_timeout=0.2),
        Services(settings, engine=services.engine),
    )
    body, headers = rpc("tools/call", {"name": "test_slow", "arguments": {}})
    try:
        with TestClient(app, base_url=LOOPBACK_URL) as client:
            response = client.post("/mcp", content=body, headers=headers)
    finally:
        SlowTool.release.set()

    assert response.status_code == 503
    assert response.json()["error"] == {"code": -32603, "message": "Request timed out"}


@pytest.mark.parametrize(
    "jwks", ['{"keys": []}', "not json", '{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}']
)
def test_an_unusable_jwks_file_is_refused_at_start(
    tmp_path: Path, settings: Settings, jwks: str
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(jwks)
    http = HttpSettings(jwt_issuer="https://i.example", jwt_audience="a", jwt_jwks=str(path))

    with pytest.raises(StartupError, match="JWKS file"):
        prepare(settings, http)
