"""PostgreSQL beside SQLite, in one run: confirmed deletes over real HTTP with three
`serve --transport http` instances on one database, and `notes_search` latency at 100k notes.

Fairness: both backends get the same topology and the same client code. Deletes: three HTTP
instances (one process each, token auth, shared state keys) on one database, SQLite's being one
WAL file on this machine; each client process deletes its own titles, round 1 on instance k and
round 2 on instance k + 1, so every delete crosses instances. After every run the database is
checked against what the clients were told: exactly the reported notes are gone, each audited
and its nonce consumed once, none twice. Search: one stdio `serve` per backend, the same
generated corpus (datasets.py, same seed) and the same queries, trials alternating.

Every PostgreSQL database here is throw-away: created for this run (the per-run delete
databases are copies of a template, CREATE DATABASE ... TEMPLATE) and dropped at the end.
NOTES_BENCH_PG_URL names the server (an administrative URL whose user may create databases);
by default the local trust-auth server of the development machines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench_lib import client
from bench_lib.common import (
    BENCH_PRINCIPAL,
    NEUTRAL_CWD,
    VENV_PY,
    WORKSPACE,
    Measure,
    StdioServer,
    check_reply,
    cpu_seconds,
    log,
    percentile,
    search_call,
    server_env,
)
from bench_lib.datasets import (
    DatasetInfo,
    _rows,
    _zipf_cdf,
    queries,
    title_for,
    vocabulary,
    working_copy,
)
from bench_lib.http_servers import free_port
from bench_lib.results import Check, Results

ADMIN_ENV = "NOTES_BENCH_PG_URL"
DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
INSTANCES = 3
PG = "PostgreSQL"
LITE = "SQLite"
CLIENT = str(Path(__file__).resolve().parent / "pg_delete_client.py")
SEARCH_INDEX = "ix_notes_search_vector"
HIT_SAMPLE = 50
Fetch = Callable[[str], list[tuple[Any, ...]]]


def admin_url() -> str:
    return os.environ.get(ADMIN_ENV) or DEFAULT_ADMIN_URL


def url_for(database: str) -> str:
    from sqlalchemy.engine.url import make_url

    return make_url(admin_url()).set(database=database).render_as_string(hide_password=False)


def _connect(database: str | None = None) -> Any:
    import psycopg
    from sqlalchemy.engine.url import make_url

    url = make_url(admin_url())
    params: dict[str, Any] = {
        "host": url.host or "127.0.0.1",
        "port": url.port or 5432,
        "user": url.username or "postgres",
        "dbname": database or url.database or "postgres",
        "autocommit": True,
    }
    if url.password:
        params["password"] = url.password
    return psycopg.connect(**params)


def reachable() -> str | None:
    """None if the server answers, else why not (the run says so and skips the section)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        with _connect() as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure to connect: say which
        where = admin_url().split("@")[-1]
        return f"PostgreSQL at {where} is not reachable ({type(exc).__name__})"
    return None


class Databases:
    """Throw-away databases of this run: every one created here is dropped by drop_all()."""

    def __init__(self) -> None:
        self.prefix = f"notes_bench_{os.getpid()}_"
        self.created: list[str] = []
        self._drop_stale()

    @staticmethod
    def _drop_stale() -> None:
        """Drop what killed runs left behind (their process is gone); only on a local server,
        where a process id means something."""
        from sqlalchemy.engine.url import make_url

        if make_url(admin_url()).host not in (None, "127.0.0.1", "localhost", "::1"):
            return
        with _connect() as conn:
            names = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'notes\\_bench\\_%'"
            ).fetchall()
            for (name,) in names:
                pid = str(name).split("_")[2]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def create(self, purpose: str, template: str | None = None) -> str:
        name = self.prefix + purpose
        with _connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            suffix = f' TEMPLATE "{template}"' if template else ""
            conn.execute(f'CREATE DATABASE "{name}"{suffix}')
        self.created.append(name)
        return name

    def drop(self, name: str) -> None:
        with _connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self.created:
            self.created.remove(name)

    def drop_all(self) -> None:
        for name in list(reversed(self.created)):
            with contextlib.suppress(Exception):
                self.drop(name)


def note_id(index: int) -> str:
    """The id datasets.py gives note `index` (the verification needs every one)."""
    return f"note_{index:020x}"


def _cli(*args: str) -> str:
    return subprocess.run(
        [VENV_PY, "-m", "notes_server", *args],
        capture_output=True,
        text=True,
        env=server_env(),
        check=True,
        cwd=NEUTRAL_CWD,
    ).stdout


def create_token(db_url: str) -> str:
    out = _cli("token", "create", BENCH_PRINCIPAL, "--db", db_url)
    return next(word for word in out.split() if word.startswith("nst_"))


def build_pg(databases: Databases, purpose: str, notes: int, seed: int = 3) -> DatasetInfo:
    """A migrated PostgreSQL database holding the same `notes` generated notes as the SQLite
    dataset of that size (same generator, seed and batches). The search index is dropped for
    the load and re-created from its own definition afterwards (timed: the index build)."""
    name = databases.create(purpose)
    url = url_for(name)
    _cli("migrate", "--db", url)  # the separate deploy step, as in production
    words, cdf, rng = vocabulary(), _zipf_cdf(), np.random.default_rng(seed)
    with _connect(name) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute(
            "INSERT INTO workspace_grants (principal, workspace, role, created_at)"
            " VALUES (%s, %s, 'write', '2026-01-01 00:00:00+00')",
            (BENCH_PRINCIPAL, WORKSPACE),
        )
        (indexdef,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (SEARCH_INDEX,)
        ).fetchone()
        started = time.perf_counter()
        conn.execute(f"DROP INDEX {SEARCH_INDEX}")
        columns = (
            "id, workspace, path, title, title_key, body, created_at, updated_at,"
            " version, archived, archived_at"
        )
        batch = 50_000  # the SQLite build's batch: the same draws from the generator
        with conn.cursor() as cursor:
            for start in range(0, notes, batch):
                stop = min(notes, start + batch)
                with cursor.copy(f"COPY notes ({columns}) FROM STDIN") as copy:
                    # The single-workspace shape (not `mixed`): row[8:] is (0, None).
                    for row in _rows(start, stop, notes, False, words, cdf, rng):
                        copy.write_row((*row[:8], 1, False, None))
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(indexdef)
        index_s = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE")
        (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return DatasetInfo(url, notes, load_s, index_s, int(size), True)


# -- confirmed deletes over HTTP, three instances ---------------------------------------------


class Instance:
    """One `serve --transport http` process; ready once its `/healthz` answers 200."""

    def __init__(self, db_url: str, logfile: Path) -> None:
        self.port = free_port()
        self._log = logfile.open("ab")
        cmd = [VENV_PY, "-m", "notes_server", "serve", "--transport", "http"]
        cmd += ["--port", str(self.port), "--db", db_url, "--auth", "token"]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=server_env(),
            cwd=NEUTRAL_CWD,
        )
        deadline = time.monotonic() + 60
        while not self._healthy():
            if self.proc.poll() is not None:
                raise RuntimeError(f"instance exited ({self.proc.returncode}); see {logfile}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"instance never became healthy; see {logfile}")
            time.sleep(0.05)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@contextlib.contextmanager
def instances(db_url: str, logfile: Path, count: int = INSTANCES) -> Iterator[list[Instance]]:
    started: list[Instance] = []
    try:
        for _ in range(count):
            started.append(Instance(db_url, logfile))
        yield started
    finally:
        for instance in started:
            instance.close()


@dataclass(frozen=True)
class DeleteRun:
    rate: float
    latencies_us: list[float]
    ids: list[str]
    cpu_per_delete_us: float  # the instances and, on PostgreSQL, the database's backends


def _run_clients(
    ports: Sequence[int],
    token: str,
    total: int,
    clients: int,
    seconds: float,
    workdir: Path,
    server_pids: Callable[[], list[int]],
) -> DeleteRun:
    """`clients` processes, client c deleting titles c, c + clients, ... and starting on
    instance c; all released at once after each has done its warm-up deletes. The CPU time of
    `server_pids()` (taken at the release) is charged to the timed deletes."""
    titles = [title_for(i) for i in range(total)]
    env = {**os.environ, "NOTES_BENCH_TOKEN": token}
    port_list = ",".join(str(p) for p in ports)
    procs = []
    for c in range(clients):
        own = workdir / f"pg-titles-{c}.txt"
        own.write_text("\n".join(titles[c::clients]), encoding="utf-8")
        procs.append(
            subprocess.Popen(
                [VENV_PY, CLIENT, port_list, str(c), str(own), str(seconds)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        )
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"delete client failed its warm-up ({proc.wait()})")
        pids = server_pids()
        cpu_before = _cpu(pids)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        outcomes = []
        for proc in procs:
            out, _ = proc.communicate(timeout=600)
            if proc.returncode:
                raise RuntimeError(f"delete client failed ({proc.returncode})")
            outcomes.append(json.loads(out))
        cpu = _cpu(pids) - cpu_before
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    count = sum(o["count"] for o in outcomes)
    return DeleteRun(
        count / max(o["elapsed"] for o in outcomes),
        [x for o in outcomes for x in o["lat"]],
        [x for o in outcomes for x in o["ids"]],
        1e6 * cpu / max(count, 1),
    )


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def verify_deletes(fetch: Fetch, total: int, ids: list[str]) -> None:
    """Exactly the notes the clients were told were deleted are gone; each was deleted (and
    audited, and its confirmation consumed) once; nothing else changed."""
    reported = set(ids)
    if len(reported) != len(ids):
        raise RuntimeError("a note was reported deleted twice")
    remaining = {row[0] for row in fetch("SELECT id FROM notes")}
    gone = {note_id(i) for i in range(total)} - remaining
    audited = sorted(row[0] for row in fetch("SELECT note_id FROM audit_log"))
    (nonces,) = fetch("SELECT count(*) FROM consumed_nonces")[0]
    problems = []
    if len(remaining) + len(ids) != total or gone != reported:
        problems.append(f"{len(gone)} notes gone, {len(ids)} reported deleted")
    if audited != sorted(ids):
        problems.append(f"{len(audited)} audit rows for {len(ids)} deletes")
    if nonces != len(ids):
        problems.append(f"{nonces} consumed nonces for {len(ids)} deletes")
    if problems:
        raise RuntimeError("delete accounting broken: " + "; ".join(problems))


def _pg_fetch(name: str) -> Fetch:
    def fetch(sql: str) -> list[tuple[Any, ...]]:
        with _connect(name) as conn:
            return list(conn.execute(sql).fetchall())

    return fetch


def _sqlite_fetch(path: Path) -> Fetch:
    def fetch(sql: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    return fetch


@dataclass
class _Backend:
    """How to get a fresh delete database for one run, and how to read it afterwards."""

    label: str
    fresh: Callable[[], str]  # -> database URL
    fetch: Callable[[], Fetch]
    discard: Callable[[], None]
    token: str
    database_pids: Callable[[], list[int]] = list  # server processes of the database, if any


def _sqlite_backend(source: str, workdir: Path) -> _Backend:
    template = working_copy(source, workdir / "pg-sqlite-template.db")
    token = create_token(f"sqlite:///{template}")
    run_db = workdir / "pg-sqlite-run.db"

    def fresh() -> str:
        working_copy(str(template), run_db)
        return f"sqlite:///{run_db}"

    return _Backend(LITE, fresh, lambda: _sqlite_fetch(run_db), lambda: None, token)


def _pg_backend(databases: Databases, notes: int) -> tuple[_Backend, DatasetInfo]:
    info = build_pg(databases, "deletes_template", notes)
    token = create_token(info.path)
    run_name = databases.prefix + "deletes_run"

    def fresh() -> str:
        databases.create("deletes_run", template=databases.prefix + "deletes_template")
        return url_for(run_name)

    def discard() -> None:
        databases.drop(run_name)

    def backends() -> list[int]:
        sql = f"SELECT pid FROM pg_stat_activity WHERE datname = '{run_name}'"
        return [int(row[0]) for row in _pg_fetch(run_name)(sql + " AND pid <> pg_backend_pid()")]

    backend = _Backend(PG, fresh, lambda: _pg_fetch(run_name), discard, token, backends)
    return backend, info


def run_deletes(
    results: Results,
    databases: Databases,
    sqlite_source: DatasetInfo,
    workdir: Path,
    *,
    clients: Sequence[int],
    reps: int,
    seconds: float,
) -> None:
    total = sqlite_source.notes
    logfile = workdir / "pg-deletes.log"
    pg_backend, _ = _pg_backend(databases, total)
    backends = [pg_backend, _sqlite_backend(sqlite_source.path, workdir)]
    rates = {(b.label, n): Measure() for b in backends for n in clients}
    cpu = {(b.label, n): Measure() for b in backends for n in clients}
    verified = 0
    for n in clients:
        log(f"PostgreSQL vs SQLite deletes, {n} client(s) over {INSTANCES} instances: {reps} reps")
        for rep in range(reps):
            for backend in backends if rep % 2 == 0 else list(reversed(backends)):
                db_url = backend.fresh()
                try:
                    with instances(db_url, logfile) as running:
                        ports = [i.port for i in running]

                        def pids(
                            running: list[Instance] = running, b: _Backend = backend
                        ) -> list[int]:
                            return [i.proc.pid for i in running] + b.database_pids()

                        outcome = _run_clients(
                            ports, backend.token, total, n, seconds, workdir, pids
                        )
                    verify_deletes(backend.fetch(), total, outcome.ids)
                    verified += 1
                finally:
                    backend.discard()
                measure = rates[(backend.label, n)]
                measure.trials.append(outcome.rate)
                measure.samples.append(percentile(outcome.latencies_us, 50) / 1000)
                cpu[(backend.label, n)].trials.append(outcome.cpu_per_delete_us)
    rows = []
    for n in clients:
        pg, lite = rates[(PG, n)], rates[(LITE, n)]
        rows.append(
            [
                str(n),
                f"{pg.median:,.0f} ({pg.low:,.0f}-{pg.high:,.0f})",
                f"{lite.median:,.0f} ({lite.low:,.0f}-{lite.high:,.0f})",
                f"{pg.median / lite.median:.2f}",
                f"{_median(pg.samples):.1f} / {_median(lite.samples):.1f}",
                f"{cpu[(PG, n)].median / 1000:.1f} / {cpu[(LITE, n)].median / 1000:.1f}",
            ]
        )
    title = (
        f"PostgreSQL beside SQLite: confirmed deletes over HTTP, {INSTANCES} instances on one "
        f"database ({total:,} notes; round 1 on instance k, round 2 on k + 1)"
    )
    results.tables[title] = (
        [
            "clients",
            "PostgreSQL deletes/s (min-max)",
            "SQLite deletes/s (min-max)",
            "PostgreSQL ÷ SQLite",
            "p50 latency per delete, PostgreSQL / SQLite (ms)",
            "CPU ms per delete, servers + database backends, PostgreSQL / SQLite",
        ],
        rows,
    )
    results.checks.append(
        Check(
            f"PostgreSQL and SQLite deletes across {INSTANCES} HTTP instances: exactly the "
            "reported notes deleted, each once (audit row and consumed nonce each), every run",
            f"{verified} runs verified",
            True,
        )
    )


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


# -- search at 100k notes ---------------------------------------------------------------------


def _hits(server: StdioServer, payloads: Sequence[bytes]) -> float:
    """Mean number of hits over the first HIT_SAMPLE queries (both backends must find notes)."""
    counts = []
    for payload in payloads[:HIT_SAMPLE]:
        reply = check_reply(server.roundtrip(payload))
        counts.append(len(reply["result"]["structuredContent"]["notes"]))
    return sum(counts) / len(counts)


def run_search(
    results: Results,
    databases: Databases,
    sqlite_info: DatasetInfo,
    workdir: Path,
    *,
    trials: int,
    query_count: int,
) -> None:
    notes = sqlite_info.notes
    log(f"PostgreSQL corpus: {notes:,} notes (COPY, then the GIN index)")
    pg_info = build_pg(databases, "search", notes)
    logfile = workdir / "pg-search.log"
    payloads = [search_call(i, q) for i, q in enumerate(queries(query_count))]
    serve = [VENV_PY, "-m", "notes_server", "serve", "--principal", BENCH_PRINCIPAL, "--db"]
    infos = {PG: pg_info, LITE: sqlite_info}
    servers: dict[str, StdioServer] = {}
    p50 = {PG: Measure(), LITE: Measure()}
    p99 = {PG: Measure(), LITE: Measure()}
    hits: dict[str, float] = {}
    log(f"search at {notes:,} notes, PostgreSQL vs SQLite: {trials} trials x {query_count}")
    try:
        servers[PG] = StdioServer([*serve, pg_info.path], logfile)
        servers[LITE] = StdioServer([*serve, f"sqlite:///{sqlite_info.path}"], logfile)
        for label, server in servers.items():
            hits[label] = _hits(server, payloads)
            client.lockstep(server, payloads, seconds=3600, max_count=len(payloads))
        for trial in range(trials):
            for label in (PG, LITE) if trial % 2 == 0 else (LITE, PG):
                outcome = client.lockstep(
                    servers[label], payloads, seconds=3600, max_count=len(payloads)
                )
                lat_ms = [x / 1000 for x in outcome.latencies_us]
                p50[label].trials.append(percentile(lat_ms, 50))
                p99[label].trials.append(percentile(lat_ms, 99))
    finally:
        for server in servers.values():
            server.close()
    rows = [
        [
            label,
            f"{p50[label].median:.2f} ({p50[label].low:.2f}-{p50[label].high:.2f})",
            f"{p99[label].median:.2f} ({p99[label].low:.2f}-{p99[label].high:.2f})",
            f"{hits[label]:.1f}",
            f"{infos[label].size_bytes / 2**20:,.0f} MiB",
        ]
        for label in (PG, LITE)
    ]
    title = (
        f"PostgreSQL beside SQLite: `notes_search` at {notes:,} notes, end to end over stdio "
        f"(same corpus, same {query_count} queries)"
    )
    results.tables[title] = (
        ["backend", "p50 ms (min-max)", "p99 ms (min-max)", "mean hits (first 50)", "database"],
        rows,
    )
    results.notes.append(
        f"PostgreSQL {notes:,}-note corpus built in this run: COPY {pg_info.load_s:.1f} s, "
        f"GIN index {pg_info.index_build_s:.1f} s (generated tsvector column, migration 0008)."
    )


def run(
    results: Results,
    delete_source: DatasetInfo,
    search_source: DatasetInfo,
    workdir: Path,
    *,
    clients: Sequence[int],
    reps: int,
    seconds: float,
    search_trials: int,
    search_queries: int,
) -> None:
    problem = reachable()
    if problem is not None:
        log(f"PostgreSQL section skipped: {problem}")
        results.notes.append(f"PostgreSQL section skipped: {problem}.")
        return
    databases = Databases()
    try:
        run_deletes(
            results,
            databases,
            delete_source,
            workdir,
            clients=clients,
            reps=reps,
            seconds=seconds,
        )
        run_search(
            results,
            databases,
            search_source,
            workdir,
            trials=search_trials,
            query_count=search_queries,
        )
    finally:
        databases.drop_all()
