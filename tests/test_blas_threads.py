"""The command line's processes run numpy's BLAS on one thread unless the operator chose a
number (semantic ranking's matrix product: one thread per core contends on a shared machine;
scripts/bench_lib/history.md (30))."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SHOW = "import notes_server.cli.main, os; print(os.environ['OPENBLAS_NUM_THREADS'])"


def _threads(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_command_line_runs_blas_on_one_thread_by_default() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _threads(env) == "1"


@pytest.mark.parametrize("chosen", ["2", "4"])
def test_an_operator_choice_of_blas_threads_is_kept(chosen: str) -> None:
    assert _threads({**os.environ, "OPENBLAS_NUM_THREADS": chosen}) == chosen
