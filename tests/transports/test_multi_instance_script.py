"""`scripts/multi-instance`, the deployment of docs/deploy.md on one machine: a throw-away
PostgreSQL database migrated as its own step, shared keys, three instances behind a round-robin
load balancer, every instance healthy, the client matrix passing through the balancer, then
everything stopped and the database dropped. Skipped without PostgreSQL or the Node clients
(scripts/clients); CI has both."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests import pg_support
from tests.transports.matrix_cells import installed

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "multi-instance"
MATRIX_CELLS = 18
RUN_TIMEOUT_S = 1200

pytestmark = pytest.mark.skipif(
    not installed(), reason="MCP clients not installed: run scripts/clients (needs npm)"
)


def test_three_instances_behind_a_load_balancer_pass_the_client_matrix() -> None:
    problem = pg_support.reachable()
    if problem is not None:
        pytest.skip(problem)
    done = subprocess.run(
        [str(SCRIPT), "--instances", "3"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=ROOT,
    )
    log = done.stderr
    assert done.returncode == 0, log[-4000:] + done.stdout[-4000:]
    assert re.search(r"3 instances healthy \(ports \d+, \d+, \d+\)", log), log
    counts = [int(n) for n in re.findall(r"instance \d: (\d+)", log)]
    assert len(counts) == 3 and min(counts) >= 1, log
    rows = [line for line in done.stdout.splitlines() if re.search(r"\| (stdio|http) +\|", line)]
    assert len(rows) == MATRIX_CELLS, done.stdout
    assert all("| ok: " in row for row in rows), done.stdout
    assert "deployment ok" in log
    assert "Traceback" not in log and "destroyed but it is pending" not in log, log
    dropped = re.search(r"dropped database (\S+)", log)
    assert dropped is not None, log
    assert not pg_support.database_exists(dropped.group(1))
