"""Cold start A/B: two source trees of notes-server, spawned alternately, medians compared.

The machine is shared and noisy, so a before/after claim about start-up needs both trees in the
same run, interleaved sample by sample; this prints the median, quartiles and the spread of each.

    .venv/bin/python scripts/bench_lib/cold_ab.py --tree old=/work/wt-old --tree new=. -n 40

A tree may carry extra `serve` options after a comma: `--tree "nosandbox=.,--sandbox off"`.
`--instructions` counts instructions under valgrind instead (needs valgrind; ~5 s a sample):
on a busy machine that count moves by about 1% where the wall clock moves by 30%.
Compile both trees first (`python -m compileall -q DIR/notes_server`): a sandboxed serve cannot
write the bytecode of the modules it imports after confinement, so it compiles them every time.
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lib.common import (
    BENCH_PRINCIPAL,
    VENV_PY,
    StdioServer,
    request,
    server_env,
)

FIRST = {
    "discover": request(1, "server/discover"),
    "tools/list": request(1, "tools/list"),
}


def _env(src: Path) -> dict[str, str]:
    env = server_env()
    env["PYTHONPATH"] = str(src)
    return env


def _migrated_db(src: Path, workdir: Path, name: str) -> str:
    """A fresh database at the schema head of that tree (trees differ in their migrations)."""
    path = workdir / f"{name}.db"
    subprocess.run(
        [VENV_PY, "-m", "notes_server", "migrate", "--db", f"sqlite:///{path}"],
        env=_env(src),
        cwd=workdir,
        check=True,
        capture_output=True,
    )
    return str(path)


def _instructions(cmd: list[str], env: dict[str, str], payload: bytes) -> float:
    """Millions of instructions the whole process runs (valgrind's I refs) for one reply."""
    grind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run(
        [*grind, *cmd], input=payload, capture_output=True, env=env, cwd=tempfile.gettempdir()
    )
    found = re.search(rb"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None or b'"result"' not in done.stdout:
        raise RuntimeError(f"valgrind run failed: {done.stderr[-500:]!r} {done.stdout[:200]!r}")
    return int(found.group(1).replace(b",", b"")) / 1e6


def _sample(
    src: Path, extra: list[str], db: str, payload: bytes, log: Path, *, instructions: bool
) -> float:
    cmd = [VENV_PY, "-m", "notes_server", "serve", *extra, "--db", f"sqlite:///{db}"]
    if instructions:
        return _instructions([*cmd, "--principal", BENCH_PRINCIPAL], _env(src), payload)
    server = StdioServer([*cmd, "--principal", BENCH_PRINCIPAL], log, env=_env(src))
    try:
        line = server.roundtrip(payload)
        elapsed = (time.perf_counter_ns() - server.spawned_ns) / 1e6
    finally:
        server.close()
    if b'"result"' not in line:
        raise RuntimeError(f"{src} answered {line[:200]!r}; see {log}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("-n", "--samples", type=int, default=30, help="samples per tree")
    parser.add_argument("--first", choices=sorted(FIRST), default="discover")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (valgrind), not ms"
    )
    args = parser.parse_args(argv)
    trees: dict[str, Path] = {}
    extras: dict[str, list[str]] = {}
    for spec in args.tree:
        name, _, rest = spec.partition("=")
        where, _, options = rest.partition(",")
        trees[name] = Path(where).resolve()
        extras[name] = shlex.split(options)
    workdir = Path(tempfile.mkdtemp(prefix="cold-ab-"))
    log = workdir / "servers.log"
    dbs = {name: _migrated_db(src, workdir, name) for name, src in trees.items()}
    samples: dict[str, list[float]] = {name: [] for name in trees}
    order = list(trees)
    for rep in range(args.samples + 1):
        for name in order if rep % 2 else reversed(order):
            elapsed = _sample(
                trees[name],
                extras[name],
                dbs[name],
                FIRST[args.first],
                log,
                instructions=args.instructions,
            )
            if rep:  # the first round only warms the page cache
                samples[name].append(elapsed)
    unit = "M instructions" if args.instructions else "ms"
    for name, values in samples.items():
        q1, med, q3 = statistics.quantiles(values, n=4)
        print(
            f"{name:>8}: median {med:6.1f} {unit}  quartiles {q1:6.1f}-{q3:6.1f}  "
            f"min {min(values):6.1f}  (n={len(values)}, first {args.first})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
