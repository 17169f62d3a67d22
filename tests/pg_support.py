"""The PostgreSQL run of the suite: NOTES_SERVER_TEST_DB=postgresql.

Each test that asks for a database URL (`helpers.default_db_url`, the tool fixtures, the
concurrency harness) gets a migrated database that no other test is using, created from a template
that is migrated once per session (CREATE DATABASE ... TEMPLATE). Creating and dropping one costs
most of a second, so when the test ends its database is emptied instead (its other connections
ended, every table but alembic_version truncated, every sequence restarted) and the next test of
the same worker gets it; one whose schema, settings or extensions no longer match the template's
(a test that altered them) is dropped instead. Unmigrated databases and per_test=False ones are
always fresh. NOTES_SERVER_TEST_PG_URL names the server (an administrative URL whose user
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
_reusable: set[str] = set()  # migrated per-test databases, emptied rather than dropped
_pool: list[str] = []  # emptied ones waiting for the next test
_template_shape: str | None = None  # None: the template has data, so nothing is reused


def on_postgresql() -> bool:
    """Whether this run of the suite uses PostgreSQL instead of SQLite files."""
    return os.environ.get(ENV_TEST_DB, "sqlite").lower() in ("postgresql", "postgres", "pg")


def admin_url() -> str:
    return os.environ.get(ENV_PG_URL) or DEFAULT_PG_URL


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
    }
    if url.password:
        params["password"] = url.password
    return psycopg.connect(**params, autocommit=True)


def _admin(statement: str) -> list[tuple[Any, ...]]:
    """Run one statement outside a transaction (CREATE/DROP DATABASE refuse to run in one)."""
    with _connect() as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


# Everything a test could change in a database besides its rows: tables, columns, indexes,
# sequences, views, triggers, functions, privileges, extensions, per-database settings and the
# migration revision. A database whose shape differs from the template's is not reused.
_SHAPE = """
SELECT concat_ws('|',
  (SELECT string_agg(version_num, ',' ORDER BY version_num) FROM alembic_version),
  (SELECT string_agg(concat_ws(':', c.relname, c.relkind, c.relacl::text,
      pg_get_indexdef(c.oid)), ',' ORDER BY c.relname, c.relkind)
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')),
  (SELECT string_agg(concat_ws(':', c.relname, a.attname, a.atttypid, a.attnotnull,
      pg_get_expr(d.adbin, d.adrelid)), ',' ORDER BY c.relname, a.attnum)
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     JOIN pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
      AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT string_agg(pg_get_constraintdef(oid), ',' ORDER BY conname, oid::regclass::text)
     FROM pg_constraint WHERE connamespace NOT IN
       (SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema'))),
  (SELECT string_agg(concat_ws(':', tgname, tgenabled, pg_get_triggerdef(oid)), ','
      ORDER BY tgname) FROM pg_trigger WHERE NOT tgisinternal),
  (SELECT string_agg(concat_ws(':', p.proname, md5(p.prosrc)), ',' ORDER BY p.proname)
     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')),
  (SELECT string_agg(nspname || ':' || coalesce(nspacl::text, ''), ',' ORDER BY nspname)
     FROM pg_namespace),
  (SELECT string_agg(extname || ':' || extversion, ',' ORDER BY extname) FROM pg_extension),
  (SELECT string_agg(array_to_string(setconfig, ';'), ',' ORDER BY setrole)
     FROM pg_db_role_setting WHERE setdatabase =
       (SELECT oid FROM pg_database WHERE datname = current_database())))
"""

_TABLES = """
SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
 WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> 'alembic_version'
"""
_SEQUENCES = """
SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences
 WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
"""


def _shape(conn: Any) -> str:
    return str(conn.execute(_SHAPE).fetchone()[0])


def _template_has_rows(conn: Any) -> bool:
    for (table,) in conn.execute(_TABLES).fetchall():
        if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
            return True
    return False


def _empty(name: str) -> bool:
    """Make a used database like a fresh copy of the template again; False when it cannot be
    (its shape changed, or something in it would not let go), and then it is dropped."""
    if _template_shape is None:
        return False
    try:
        with _connect(name) as conn:
            conn.execute("SET lock_timeout = '5s'")
            # Connections the test left (a pool not disposed, a child process): their locks,
            # LISTENs, advisory locks and prepared statements end with them.
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]:
                return False
            if _shape(conn) != _template_shape:
                return False
            tables = [row[0] for row in conn.execute(_TABLES).fetchall()]
            if tables:
                conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
            for (sequence,) in conn.execute(_SEQUENCES).fetchall():
                conn.execute(f"ALTER SEQUENCE {sequence} RESTART")
    except Exception:  # anything odd about it: a fresh copy is the safe answer
        return False
    return True


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
    global _template_shape
    with _connect(_TEMPLATE) as conn:
        _template_shape = None if _template_has_rows(conn) else _shape(conn)
    _template_ready = True


def database_url(tmp_path: Path, *, migrated: bool = True, per_test: bool = True) -> str:
    """A fresh database for this test (one per tmp_path; the same URL when asked again),
    dropped at the test's end; with per_test=False the caller drops it (`drop_database`)."""
    digest = hashlib.sha256(f"{tmp_path}|{migrated}".encode()).hexdigest()[:16]
    name = f"{_PREFIX}{digest}"
    with _lock:
        if name not in _created and name not in _kept:
            if migrated and per_test and _pool:
                _rename(_pool.pop(), name)
                _reusable.add(name)
            elif migrated:
                _ensure_template()
                _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_TEMPLATE}"')
                if per_test:
                    _reusable.add(name)
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


def _rename(old: str, new: str) -> None:
    """A pooled database takes the name the test's tmp_path gives (names stay per test, so a
    test never sees the previous one's URL)."""
    _admin(f'ALTER DATABASE "{old}" RENAME TO "{new}"')


def drop_created() -> None:
    """At each test's end: empty the migrated databases it used for the next test, drop the
    others (and any that cannot be emptied)."""
    with _lock:
        names = list(_created)
        _created.clear()
        for name in names:  # nothing to connect for when the test made none
            reusable = name in _reusable
            _reusable.discard(name)
            if reusable and _empty(name):
                spare = f"{_PREFIX}spare{len(_pool)}"
                _rename(name, spare)
                _pool.append(spare)
            else:
                _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_template() -> None:
    global _template_ready
    with _lock:
        for name in _pool:
            _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _pool.clear()
    if _template_ready:
        _admin(f'DROP DATABASE IF EXISTS "{_TEMPLATE}" WITH (FORCE)')
        _template_ready = False
