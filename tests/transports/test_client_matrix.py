"""Every host connects: the client matrix (issue 14).

For each real client, mode and transport (stdio; Streamable HTTP with a bearer token): connect,
list tools, create three notes, search, and delete them answering the confirmation with accept,
decline and cancel; the Inspector CLI, which cannot answer forms, must get the documented
refusal (a tool error in the 2025 era, -32021's message in the modern one) and change nothing.
The matrix is printed. The Node clients come from `scripts/clients` (skipped without them).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine

from notes_server.compat_2025.translate import NEEDS_ELICITATION
from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants
from notes_server.store.engine import make_engine, write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import utc_now
from tests.transports.http_support import start_http_server
from tests.transports.matrix_cells import Target, inspector_cell, installed, python_cell, ts_cell

pytest.importorskip("mcp.client.client")
pytestmark = pytest.mark.skipif(
    not installed(), reason="MCP clients not installed: run scripts/clients (needs npm)"
)

Runner = Callable[[str, Target], dict[str, Any]]
CONFIRMED = {
    "found": ["accept", "cancel", "decline"],
    "asked": 3,
    "deleted": [True, False, False],
    "after": ["cancel", "decline"],
}
MODERN_REFUSAL = "the request must declare the elicitation capability with form mode"


def python(mode: str) -> Runner:
    return lambda transport, target: anyio.run(python_cell, mode, transport, target)


def ts(flavor: str, mode: str) -> Runner:
    return functools.partial(ts_cell, flavor, mode)


def inspector(era: str) -> Runner:
    return functools.partial(inspector_cell, era)


# (client, mode, runner, confirms through elicitation)
CLIENTS: list[tuple[str, str, Runner, bool]] = [
    ("python mcp 2.x", "2026-07-28", python("2026-07-28"), True),
    ("python mcp 2.x", "auto", python("auto"), True),
    ("python mcp 2.x", "legacy", python("legacy"), True),
    ("ts sdk 1.32.2", "latest", ts("sdk1", "legacy"), True),
    ("ts client 2.4.0", "pin", ts("v2", "pin"), True),
    ("ts client 2.4.0", "auto", ts("v2", "auto"), True),
    ("ts client 2.4.0", "legacy", ts("v2", "legacy"), True),
    ("inspector cli 2.12", "default", inspector("legacy"), False),
    ("inspector cli 2.12", "modern", inspector("modern"), False),
]


# scripts/multi-instance sets these: the matrix then runs against its deployment (N instances
# behind a load balancer on one PostgreSQL database) instead of a server of its own.
DEPLOYED_URL = "NOTES_SERVER_MATRIX_URL"
DEPLOYED_DB = "NOTES_SERVER_MATRIX_DB"


@pytest.fixture
def targets(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Target]]:
    """target(cell) -> where that cell connects, with its own granted workspace."""
    if os.environ.get(DEPLOYED_URL):
        yield from _deployed(tmp_path, os.environ[DEPLOYED_URL], os.environ[DEPLOYED_DB])
        return
    migrated_engine: Engine = request.getfixturevalue("migrated_engine")
    grant = request.getfixturevalue("grant")
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    keys = KeyRing.generate_spec()
    db_url = str(migrated_engine.url)
    server = start_http_server(
        tmp_path, db_url, "--auth", "token", env={"NOTES_SERVER_STATE_KEYS": keys}
    )
    env = {"NOTES_SERVER_STATE_KEYS": keys, "XDG_DATA_HOME": str(tmp_path / "xdg")}

    def target(cell: str) -> Target:
        workspace = grant("alice", f"file:///home/alice/{cell}")
        return Target(f"{server.url}/mcp", token, db_url, env, workspace)

    yield target
    server.stop()


def _deployed(tmp_path: Path, url: str, db_url: str) -> Iterator[Callable[[str], Target]]:
    """Targets on a running deployment: its URL for HTTP, its database (and shared keys) for
    stdio; the token and grants are made in its database."""
    engine = make_engine(db_url)
    try:
        _, token = create_token(SqlTokenRecords(engine), "alice")
        keys = os.environ["NOTES_SERVER_STATE_KEYS"]
        env = {"NOTES_SERVER_STATE_KEYS": keys, "XDG_DATA_HOME": str(tmp_path / "xdg")}

        def target(cell: str) -> Target:
            workspace = canonical_workspace(f"file:///home/alice/{cell}")
            with write_tx(engine) as conn:
                grants.upsert(conn, "alice", workspace, "write", utc_now())
            return Target(url, token, db_url, env, workspace)

        yield target
    finally:
        engine.dispose()


def verdict(outcome: dict[str, Any], confirms: bool) -> str:
    """'ok' or what differed from the expected outcome."""
    if outcome["tools"] < 9:
        return f"listed {outcome['tools']} tools"
    if confirms:
        seen = {key: outcome[key] for key in CONFIRMED}
        return "ok" if seen == CONFIRMED else f"unexpected {seen}"
    legacy = outcome["version"] == "legacy"
    expected = NEEDS_ELICITATION if legacy else MODERN_REFUSAL
    refused = expected in (outcome["refusal"] or "")
    kept = outcome["found"] == outcome["after"] == ["accept", "cancel", "decline"]
    return "ok" if refused and kept else f"unexpected {outcome}"


def test_every_client_mode_and_transport_connects_and_confirms(
    targets: Callable[[str], Target], capsys: pytest.CaptureFixture[str]
) -> None:
    rows: list[tuple[str, ...]] = []
    for client, mode, runner, confirms in CLIENTS:
        for transport in ("stdio", "http"):
            cell = f"{client.split()[0]}-{client.split()[1]}-{mode}-{transport}"
            try:
                outcome = runner(transport, targets(cell))
            except Exception as exc:  # a crash is a failed cell, reported in the matrix
                rows.append((client, mode, transport, "-", f"crashed: {exc!r}"[:300]))
                continue
            deletes = "accept/decline/cancel" if confirms else "refused (no elicitation)"
            result = verdict(outcome, confirms)
            rows.append((client, mode, transport, str(outcome["version"]), f"{result}: {deletes}"))
    matrix = render(rows)
    with capsys.disabled():  # the matrix is part of every run's output, passing or not
        print("\n" + matrix)
    assert all(": " in row[4] and row[4].startswith("ok") for row in rows), matrix


def render(rows: list[tuple[str, ...]]) -> str:
    header = ("client", "mode", "transport", "negotiated", "connect, list, create, search, delete")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])
