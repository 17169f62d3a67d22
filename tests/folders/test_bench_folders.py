"""`scripts/bench_folders` runs end to end and reports files/s (not the numbers' size)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_folder_benchmark_reports_files_per_second() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_folders"), "--files", "120", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )

    result = json.loads(completed.stdout)
    assert result["files"] == 120
    for key in ("import_files_per_s", "unchanged_import_files_per_s", "no_change_sync_files_per_s"):
        assert result[key] > 0
