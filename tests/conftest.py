"""Generic fixtures: settings on a temp SQLite file, a migrated engine, the in-process server,
grants, a `call` helper that speaks 2026-07-28, and real `serve` subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import Engine

from notes_server.app import create_server
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.services import Services
from tests import pg_support
from tests.helpers import ServerProcess, default_db_url, make_request
from tests.helpers import spawn_server as _spawn_server

Call = Callable[..., dict[str, Any]]

# Property tests check behaviour, not speed: Hypothesis's default 200 ms per-example deadline is
# a timing assertion, and it tripped on a loaded two-core machine. Speed lives in scripts/bench.
hypothesis_settings.register_profile("notes-server", deadline=None)
hypothesis_settings.load_profile("notes-server")


def pytest_configure(config: pytest.Config) -> None:
    # Started in the background (`cmd &`, nohup), pytest inherits SIGINT ignored, and so would
    # every process a test starts: the Ctrl-C tests would wait forever for a reaction. A handled
    # signal resets to the default across exec, an ignored one does not.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    stale = sorted(name for name in SLOW_MODULES if not (_TESTS / name).is_file())
    if stale:
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES names no file: {stale}")
    if pg_support.on_postgresql():
        problem = pg_support.reachable()
        if problem is not None:
            # Say so and skip the run; CI checks the server first (.ci/pg-preflight) and fails.
            pytest.exit(f"{problem}; the PostgreSQL run is skipped", returncode=0)


# Whole modules whose subject is SQLite itself, skipped on PostgreSQL (the multi-process races
# and crash points read the SQLite file; PostgreSQL's race is test_pg_multi_instance.py).
SQLITE_ONLY_MODULES = {
    "concurrency/test_delete_race.py": "processes racing on one SQLite file",
    "concurrency/test_first_start_race.py": "the embedded default database's first start",
    "concurrency/test_revoke_between_rounds.py": "the harness reads the SQLite file",
    "test_cli_db_faults.py": "SQLite fault injection (garbage file, read-only directory)",
    "transports/test_stdio_db_faults.py": "SQLite fault injection",
    "transports/test_http_db_faults.py": "SQLite fault injection",
    "security/test_sandbox_process.py": "the sandbox's SQLite file rules",
    "security/test_folder_sandbox.py": "the sandbox's SQLite file rules",
    "security/test_token_cache.py": "SQLite's change counter; a server database remembers nothing",
    "test_hot_paths.py": "the pysqlite fast paths and the SQLite cold start",
    "packaging/test_wheel.py": "builds the wheel; its database is not the subject",
}
# Whole modules marked `slow` (left out of the quick loop, `scripts/test -m "not slow"`): real
# clients and browsers, several server processes at once, crash points, builds and benchmarks,
# and the modules of many process start-ups. The whole run still runs all of them.
# A single test elsewhere may carry @pytest.mark.slow itself.
SLOW_MODULES = {
    "test_bench_smoke.py": "runs scripts/bench against the SDK peer",
    "packaging/test_wheel.py": "builds and installs the wheel",
    "concurrency/test_crash_safety.py": "kills servers at crash points",
    "concurrency/test_delete_race.py": "processes racing on one database",
    "concurrency/test_first_start_race.py": "processes racing on a first start",
    "concurrency/test_edit_sections_race.py": "processes racing on one note",
    "concurrency/test_rename_edit_race.py": "processes racing on a rename",
    "concurrency/test_pg_legacy_cross_instance.py": "several server processes",
    "concurrency/test_pg_migrate_race.py": "processes racing on a migration",
    "concurrency/test_pg_multi_instance.py": "several server processes",
    "concurrency/test_revoke_between_rounds.py": "processes racing on a revocation",
    "folders/test_symlink_race.py": "an adversary racing a sync",
    "security/test_sandbox_process.py": "confined server processes and their workers",
    "transports/test_http_process.py": "multi-worker HTTP servers",
    "transports/test_http_token_revocation_process.py": "a server and the CLI at once",
    "transports/test_legacy_http_roots.py": "two server processes per test",
    "transports/test_legacy_http_elicitation.py": "two server processes per test",
    "transports/test_legacy_http_sdk_client.py": "a real client (the Python SDK)",
    "transports/test_legacy_roots_sdk_client.py": "a real client (the Python SDK)",
    "compat_2025/test_legacy_sdk_client.py": "a real client (the Python SDK)",
    "compat_2025/test_rounds_both_transports.py": "a stdio and an HTTP server process",
    "approval/test_purge_sdk_client.py": "a real client (the Python SDK)",
    "transports/test_client_matrix.py": "real clients (scripts/clients)",
    "transports/test_multi_instance_script.py": "real clients and three instances",
    "transports/test_legacy_http_ts_client.py": "a real client (scripts/clients)",
    "transports/test_subscriptions_instances_postgresql.py": "three server processes",
    "transports/test_subscriptions_sdk_clients.py": "real clients (the SDKs) and a second server",
    "transports/test_subscriptions_attacks_http.py": "HTTP servers and 19,000-change floods",
    "transports/test_subscriptions_attacks_stdio.py": "stdio servers and 15,000-change floods",
    "approval/test_purge_ts_client.py": "a real client (scripts/clients)",
    "approval/test_purge_browser.py": "a real browser (scripts/apps-browser)",
    "apps/test_apps_browser.py": "a real browser (scripts/apps-browser)",
    # Process-heavy modules that each took 20-180 s of the quick loop (2 December 2026, load
    # average 6-11 on two cores; --durations and the module times in pytest's cache):
    "transports/test_legacy_http_get_stream.py": "two HTTP server processes per test",
    "transports/test_subscriptions_stdio.py": "several server processes per test",
    "transports/test_http_semantic_search.py": "an HTTP server and the index command",
    "tasks/test_tasks_transports.py": "server processes that outlive their clients",
    "tools/test_delete_stdio.py": "a stdio server process per test",
    "approval/test_purge_legacy.py": "stdio and HTTP server processes with the page",
    "oauth/test_oauth_sdk_client.py": "a real client (the Python SDK) and a server",
    "security/test_folder_sandbox.py": "confined import, export and sync processes",
    "folders/test_progress.py": "a ten-thousand-file folder on a terminal",
    "folders/test_ctrl_c.py": "real processes and a real SIGINT",
    "test_cli_call.py": "a `call` process and the server it spawns, per test",
    "test_cli_call_arguments.py": "a `call` process and the server it spawns, per test",
    "test_cli_call_ctrl_c.py": "a `call` process, its server and a real SIGINT",
    "test_cli_db_faults.py": "a CLI process per command and database fault",
    "test_cli_postgresql.py": "CLI processes on PostgreSQL databases",
    "test_startup_settings.py": "a CLI process per command and setting",
    "test_startup_messages.py": "serve and sync processes, and a taken port",
    "transports/test_http_hostile_input.py": "a real HTTP server and its 10 s head timeout",
    "compat_2025/test_legacy_roots.py": "a stdio server process per test",
    "compat_2025/test_legacy_subscriptions_stdio.py": "two server processes per test",
    "approval/test_purge_stdio.py": "a confined stdio server and its approval page",
    "approval/test_purge_process.py": "a two-worker HTTP server",
    "approval/test_purge_call.py": "a `call` process, its server and the page",
    "approval/test_purge_port_zero.py": "HTTP server processes on port 0",
    "approval/test_sign_in_limit.py": "two server instances",
    "folders/test_bench_folders.py": "runs scripts/bench_folders",
}
_TESTS = Path(__file__).parent


def _module(item: pytest.Item) -> str:
    return item.path.relative_to(_TESTS).as_posix() if item.path.is_relative_to(_TESTS) else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _module(item) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    _slowest_modules_first(config, items)
    if not pg_support.on_postgresql():
        return
    for item in items:
        marker = item.get_closest_marker("sqlite_only")
        reason = SQLITE_ONLY_MODULES.get(_module(item))
        if marker is not None:
            reason = marker.args[0] if marker.args else "SQLite-specific behaviour"
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason}"))


# Under pytest-xdist a run ends when its last module does: a 60 s module handed out last keeps one
# worker busy while the other idles. So modules go out longest first, by what each took in the
# last run (pytest's cache, .pytest_cache/), a module never timed counting as long if it is slow
# and as short otherwise; `scripts/test` lets an idle worker steal queued tests (--dist
# worksteal). Modules stay whole (module-scoped fixtures) and keep their own order of tests.
MODULE_SECONDS = "notes-server/module-seconds"
UNTIMED_SLOW_S = 30.0
_run_seconds: dict[str, float] = {}


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _slowest_modules_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    last: dict[str, float] = cache.get(MODULE_SECONDS, {}) if cache is not None else {}
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(_file(item.nodeid), []).append(item)

    def seconds(name: str) -> float:
        if name in last:
            return float(last[name])
        slow = any(item.get_closest_marker("slow") for item in groups[name])
        return UNTIMED_SLOW_S if slow else 0.0

    ordered = sorted(groups, key=seconds, reverse=True)  # stable: ties keep collection order
    items[:] = [item for name in ordered for item in groups[name]]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each module's time (set-up, call and tear-down of its tests; under xdist the controller
    sees every worker's reports), for the next run's order."""
    _run_seconds[_file(report.nodeid)] = _run_seconds.get(_file(report.nodeid), 0.0) + (
        report.duration
    )


def _remember_module_seconds(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _run_seconds:
        return  # no cache, or an xdist worker (the controller writes), or nothing ran
    known: dict[str, float] = cache.get(MODULE_SECONDS, {})
    known.update({name: round(s, 2) for name, s in _run_seconds.items()})
    cache.set(MODULE_SECONDS, known)


@pytest.fixture(autouse=True)
def _drop_test_databases() -> Iterator[None]:
    """The PostgreSQL databases a test created (any run: see `pg_engine`) are dropped when it
    ends."""
    yield
    pg_support.drop_created()


# What a skip's reason names -> the one summary line for it (item 16 of issue 21).
NOT_INSTALLED = {
    "run scripts/clients": "real clients (run scripts/clients)",
    "run scripts/apps-browser": "real browser (run scripts/apps-browser)",
}


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line at the end when tests skipped because an installer has not run: easy to miss
    among the other skips, and `scripts/test --all` runs them."""
    counts = dict.fromkeys(NOT_INSTALLED.values(), 0)
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        for needle, what in NOT_INSTALLED.items():
            counts[what] += needle in reason
    missing = [f"{what}: {n} tests" for what, n in counts.items() if n]
    if missing:
        terminalreporter.write_line(
            f"skipped: {'; '.join(missing)}; `scripts/test --all` installs them and runs all"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _remember_module_seconds(session)
    pg_support.drop_created()
    pg_support.drop_template()


@pytest.fixture
def pg_engine(tmp_path: Path) -> Iterator[Engine]:
    """A migrated throw-away PostgreSQL database in every run of the suite (for what only
    PostgreSQL has); skipped when no server is reachable."""
    from notes_server.store.engine import make_engine

    problem = pg_support.reachable()
    if problem is not None:
        pytest.skip(problem)
    engine = make_engine(pg_support.database_url(tmp_path / "pg"))
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        db_url=default_db_url(tmp_path),
        principal="alice",
        state_keys=KeyRing.generate_spec(),
        store_impl=os.environ.get("NOTES_SERVER_STORE_IMPL") or "auto",
    )


@pytest.fixture
def store_impl() -> str:
    """Which repository implementations the fixtures' engines use: NOTES_SERVER_STORE_IMPL, else
    "auto" (the SQLite fast path). tests/store and tests/tools run both "auto" and "core"."""
    return os.environ.get("NOTES_SERVER_STORE_IMPL") or "auto"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty SQLite file. Tests copy it instead of migrating their own database: a
    copy is a millisecond, a migration a third of a second of fsyncs on a busy disk."""
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    path = tmp_path_factory.mktemp("sqlite-template") / "notes.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    return path


def _new_sqlite_file(db_url: str) -> Path | None:
    """The file of a SQLite URL that does not exist yet (None for any other database)."""
    from sqlalchemy.engine.url import make_url

    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    path = Path(url.database)
    return None if path.exists() else path


@pytest.fixture
def migrated_engine(settings: Settings, store_impl: str, sqlite_template: Path) -> Iterator[Engine]:
    """The test's database at the head revision: a copy of the session's migrated template
    for a new SQLite file, else migrated here (PostgreSQL databases come from their own
    template, pg_support)."""
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    fresh = _new_sqlite_file(settings.db_url)
    if fresh is not None:
        shutil.copyfile(sqlite_template, fresh)
    engine = make_engine(settings.db_url, store_impl=store_impl)
    try:
        if fresh is None:
            migrate.upgrade(engine)
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def services(settings: Settings, migrated_engine: Engine) -> Services:
    return Services(settings, engine=migrated_engine)


@pytest.fixture
def server(settings: Settings, services: Services) -> McpServer:
    return create_server(settings, services)


@pytest.fixture
def grant(migrated_engine: Engine) -> Callable[..., str]:
    """grant(principal, uri, role="write") stores a grant on the canonical URI and returns it."""
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import grants
    from notes_server.store.engine import write_tx
    from notes_server.tools.services import utc_now

    def _grant(principal: str, uri: str, role: str = "write") -> str:
        canonical = canonical_workspace(uri)
        with write_tx(migrated_engine) as conn:
            grants.upsert(conn, principal, canonical, role, utc_now())
        return canonical

    return _grant


@pytest.fixture
def call(server: McpServer) -> Call:
    """call(method, params=None, *, principal="alice", caps=None, id=1) -> parsed reply."""

    def _call(
        method: str,
        params: dict[str, Any] | None = None,
        *,
        principal: str = "alice",
        caps: dict[str, Any] | None = None,
        id: int | str = 1,
    ) -> dict[str, Any]:
        request = make_request(method, params, caps=caps, id=id)
        raw = server.handle_raw(json.dumps(request).encode(), principal)
        assert raw is not None, "a request must always be answered"
        reply: dict[str, Any] = json.loads(raw)
        return reply

    return _call


@pytest.fixture
def call_tool(call: Call) -> Call:
    """call_tool(name, arguments, *, principal="alice", caps=None) -> parsed reply."""

    def _call_tool(name: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return call("tools/call", {"name": name, "arguments": arguments}, **kw)

    return _call_tool


@pytest.fixture
def spawn_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """spawn_server(*args, db_url=..., principal="alice", env=None): a real `serve` process,
    stopped (stdin closed, then waited for) at teardown."""
    started: list[ServerProcess] = []

    def _spawn(*args: str, **kw: Any) -> ServerProcess:
        process = _spawn_server(tmp_path, *args, **kw)
        started.append(process)
        return process

    yield _spawn
    for process in started:
        process.close()  # also closes the pipes of a process that has already exited
