"""The PostgreSQL run of the suite: NOTES_SERVER_TEST_DB=postgresql.

Each test that asks for a database URL (`helpers.default_db_url`, the tool fixtures, the
concurrency harness) gets its own throw-away database, created from a template that is migrated
once per session (CREATE DATABASE ... TEMPLATE copies the files: a few milliseconds) and dropped
when the test ends. NOTES_SERVER_TEST_PG_URL names the server (an administrative URL whose user
may create databases); by default the local trust-auth server of the development machines.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

ENV_TEST_DB = "NOTES_SERVER_TEST_DB"
ENV_PG_URL = "NOTES_SERVER_TEST_PG_URL"
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_PREFIX = f"nstest_{os.getpid()}_"
_TEMPLATE = f"{_PREFIX}template"
_lock = threading.Lock()
_created: list[str] = []
_kept: list[str] = []
_template_ready = False


def on_postgresql() -> bool:
    """Whether this run of the suite uses PostgreSQL instead of SQLite files."""
    return os.environ.get(ENV_TEST_DB, "sqlite").lower() in ("postgresql", "postgres", "pg")


def admin_url() -> str:
    return os.environ.get(ENV_PG_URL) or DEFAULT_PG_URL


def url_for(database: str) -> str:
    from sqlalchemy.engine.url import make_url

    return make_url(admin_url()).set(database=database).render_as_string(hide_password=False)


def _admin(statement: str) -> list[tuple[Any, ...]]:
    """Run one statement outside a transaction (CREATE/DROP DATABASE refuse to run in one)."""
    import psycopg
    from sqlalchemy.engine.url import make_url

    url = make_url(admin_url())
    params: dict[str, Any] = {
        "host": url.host or "127.0.0.1",
        "port": url.port or 5432,
        "user": url.username or "postgres",
        "dbname": url.database or "postgres",
    }
    if url.password:
        params["password"] = url.password
    with psycopg.connect(**params, autocommit=True) as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _drop_stale() -> None:
    """Drop what runs killed before their cleanup left (their process is gone); only for a
    server on this machine, where a process id means something."""
    from sqlalchemy.engine.url import make_url

    if make_url(admin_url()).host not in (None, "127.0.0.1", "localhost", "::1"):
        return
    for (name,) in _admin("SELECT datname FROM pg_database WHERE datname LIKE 'nstest\\_%'"):
        pid = str(name).split("_")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_exists(name: str) -> bool:
    return bool(_admin(f"SELECT 1 FROM pg_database WHERE datname = '{name}'"))


def reachable() -> str | None:
    """None if the server answers, else why not (for the skip/fail message)."""
    try:
        _admin("SELECT 1")
    except Exception as exc:  # any failure to connect: say which
        return f"PostgreSQL at {admin_url().split('@')[-1]} is not reachable: {exc}"
    return None


def _ensure_template() -> None:
    global _template_ready
    if _template_ready:
        return
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    _drop_stale()
    _admin(f'DROP DATABASE IF EXISTS "{_TEMPLATE}" WITH (FORCE)')
    _admin(f'CREATE DATABASE "{_TEMPLATE}"')
    engine = make_engine(url_for(_TEMPLATE))
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    _template_ready = True


def database_url(tmp_path: Path, *, migrated: bool = True, per_test: bool = True) -> str:
    """A fresh database for this test (one per tmp_path; the same URL when asked again),
    dropped at the test's end; with per_test=False the caller drops it (`drop_database`)."""
    digest = hashlib.sha256(f"{tmp_path}|{migrated}".encode()).hexdigest()[:16]
    name = f"{_PREFIX}{digest}"
    with _lock:
        if name not in _created and name not in _kept:
            if migrated:
                _ensure_template()
                _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_TEMPLATE}"')
            else:
                _admin(f'CREATE DATABASE "{name}"')
            (_created if per_test else _kept).append(name)
    return url_for(name)


def drop_database(url: str) -> None:
    """Drop a database made with per_test=False."""
    from sqlalchemy.engine.url import make_url

    name = make_url(url).database
    with _lock:
        if name in _kept:
            _kept.remove(name)
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_created() -> None:
    """Drop the databases made since the last call (at each test's end)."""
    with _lock:
        names = list(_created)
        _created.clear()
    for name in names:  # nothing to connect for when the test made none
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_template() -> None:
    global _template_ready
    if _template_ready:
        _admin(f'DROP DATABASE IF EXISTS "{_TEMPLATE}" WITH (FORCE)')
        _template_ready = False
