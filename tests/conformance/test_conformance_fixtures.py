"""The conformance fixture tools and the expected-failures bookkeeping of scripts/conformance."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app, create_server
from notes_server.config import HttpSettings, Settings
from notes_server.tools.registry import SHIPPED
from notes_server.tools.services import Services
from tests.helpers import make_request

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = "tests.conformance.fixture_tools"
SAMPLING = {"sampling": {}}


@pytest.fixture
def fixture_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, tools_modules=(FIXTURES,))


def test_fixture_tools_are_not_shipped() -> None:
    assert not [cls.name for cls in SHIPPED if cls.name.startswith("test_")]


def test_missing_capability_is_400_with_the_required_capability_over_http(
    fixture_settings: Settings, services: Services
) -> None:
    app = create_http_app(
        fixture_settings,
        HttpSettings(auth="none"),
        Services(fixture_settings, engine=services.engine),
    )
    message = make_request("tools/call", {"name": "test_missing_capability", "arguments": {}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_missing_capability",
    }
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        response = client.post("/mcp", content=json.dumps(message), headers=headers)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32021
    assert response.json()["error"]["data"] == {"requiredCapabilities": SAMPLING}


def call(settings: Settings, services: Services, params: dict[str, Any], **kw: Any) -> Any:
    server = create_server(settings, Services(settings, engine=services.engine))
    raw = server.handle_raw(json.dumps(make_request("tools/call", params, **kw)), "conformance")
    assert raw is not None
    return json.loads(raw)


def test_multi_round_fixture_asks_twice_then_completes(
    fixture_settings: Settings, services: Services
) -> None:
    name = "test_input_required_result_multi_round"
    first = call(fixture_settings, services, {"name": name, "arguments": {}})["result"]
    answer = {"action": "accept", "content": {"name": "Alice"}}
    second = call(
        fixture_settings,
        services,
        {
            "name": name,
            "arguments": {},
            "inputResponses": {"step1": answer},
            "requestState": first["requestState"],
        },
        id=2,
    )["result"]
    third = call(
        fixture_settings,
        services,
        {
            "name": name,
            "arguments": {},
            "inputResponses": {"step2": answer},
            "requestState": second["requestState"],
        },
        id=3,
    )["result"]

    assert list(first["inputRequests"]) == ["step1"]
    assert list(second["inputRequests"]) == ["step2"]
    assert third["resultType"] == "complete"


def test_tampered_fixture_state_is_rejected(fixture_settings: Settings, services: Services) -> None:
    name = "test_input_required_result_tampered_state"
    first = call(fixture_settings, services, {"name": name, "arguments": {}})["result"]
    reply = call(
        fixture_settings,
        services,
        {
            "name": name,
            "arguments": {},
            "inputResponses": {"confirm": {"action": "accept"}},
            "requestState": first["requestState"] + "-TAMPERED",
        },
        id=2,
    )

    assert reply["error"] == {"code": -32602, "message": "Invalid or expired requestState"}


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "conformance_runner", ROOT / "scripts/conformance.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_every_expected_failure_names_a_check_and_a_reason(revision: str) -> None:
    entries = load_runner().expected_failures(revision)

    for key, reason in entries.items():
        scenario, _, check = key.partition("/")
        assert scenario and check and len(reason) > 10, key


SUITE_OUTPUT = """✗ resources-read-text: 1 passed, 1 failed
✓ tools-list: 4 passed, 0 failed
✗ tasks-lifecycle: 1 passed, 8 failed

Not scored for 2026-07-28: 1 scenario(s) run, 1 failing.
  ✗ tasks-lifecycle (extension)
"""


def check(name: str, status: str) -> dict[str, str]:
    return {"name": name, "status": status}


def test_only_unexpected_scored_failures_fail_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runner = load_runner()
    expected = tmp_path / "expected-failures.txt"
    expected.write_text("# a comment\nresources-read-text/ResourcesReadText a reason for it\n")
    runner.EXPECTED = {"2026-07-28": expected}
    results = {
        "resources-read-text": [check("ResourcesReadText", "FAILURE"), check("Other", "SUCCESS")],
        "tools-list": [check("ToolsList", "SUCCESS")],
        "tasks-lifecycle": [check("TaskCreate", "FAILURE")],
    }
    assert runner.report(SUITE_OUTPUT, results, "2026-07-28") == 0

    results["tools-list"] = [check("ToolsList", "FAILURE")]
    assert runner.report(SUITE_OUTPUT, results, "2026-07-28") == 1
    assert "UNEXPECTED FAILURE tools-list/ToolsList" in capsys.readouterr().out
