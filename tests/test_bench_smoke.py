"""`scripts/bench --smoke` (every suite and row on the smallest inputs) runs end to end and
writes its report and plots (not the numbers)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH_EXTRA = ("mcp", "matplotlib", "numpy")
MISSING = [name for name in BENCH_EXTRA if importlib.util.find_spec(name) is None]

needs_bench_extra = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the bench extra is not installed ({', '.join(MISSING)} missing): "
    "`.venv/bin/pip install -e '.[bench]'` to run the benchmark smoke test",
)


@needs_bench_extra
def test_the_smoke_benchmark_writes_the_report_and_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench"),
            "--smoke",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    for heading in ("## Machine", "## Targets", "## Results", "Reproduce", "latency.png"):
        assert heading in report, f"BENCHMARKS.md lacks {heading!r}"
    for measured in ("Cold start", "Lock-step", "Pipelined", "Confirmed delete", "Search"):
        assert measured in report, f"BENCHMARKS.md has no {measured!r} results"
    for floor_table in (
        "### Speed to the floor: lock-step over stdio",
        "### Speed to the floor: cold start to the first `server/discover`",
    ):
        assert floor_table in report, f"BENCHMARKS.md lacks {floor_table!r}"
    for kind in ("server/discover", "tools/list", "notes_read"):
        assert f"floor: lock-step `{kind}` rate" in report  # its target row
    assert "HTTP" in report  # measured, or recorded as not available
    assert "PostgreSQL" in report  # measured, or recorded as skipped
    plot = (out / "latency.png").read_bytes()
    assert plot.startswith(b"\x89PNG"), "latency.png is not a PNG"
    assert "2025-11-25 HTTP sessions" in report  # the curve with elicitation round trips
    assert "no benchmark note was left" in report  # its end check ran and passed
    legacy_plot = (out / "http-legacy-load.png").read_bytes()
    assert legacy_plot.startswith(b"\x89PNG"), "http-legacy-load.png is not a PNG"


@needs_bench_extra
def test_the_postgresql_section_says_it_was_skipped_when_no_server_answers(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    out = tmp_path / "out"
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench"),
            "--smoke",
            "--only",
            "pg",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={
            **os.environ,
            "NOTES_BENCH_PG_URL": f"postgresql+psycopg://postgres@127.0.0.1:{closed}/postgres",
        },
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    skipped = (
        f"PostgreSQL section skipped: PostgreSQL at 127.0.0.1:{closed}/postgres is not reachable"
    )
    assert skipped in report
    assert skipped in completed.stderr
    assert "### PostgreSQL beside SQLite" not in report  # no table of figures


def test_the_runtime_package_imports_no_benchmark_dependency() -> None:
    probe = (
        "import sys, notes_server.cli.main, notes_server.app, notes_server.store.notes, "
        "notes_server.transports.stdio; "
        f"print(sorted(m for m in {BENCH_EXTRA!r} if m in sys.modules))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert completed.stdout.strip() == "[]"
