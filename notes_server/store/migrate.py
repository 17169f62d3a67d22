"""Run Alembic from code, against migrations shipped inside the package."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported lazily below: `serve` checks HEAD via `sqlite_revision` before SQLAlchemy loads.
    from sqlalchemy import Connection, Engine

HEAD = "0026"
# PostgreSQL: the advisory lock key that serializes concurrent upgrades (any constant bigint).
_MIGRATION_LOCK = 0x6E6F7465735F6D67


def migrations_dir() -> Path:
    spec = importlib.util.find_spec("notes_server.migrations")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("notes_server.migrations is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def alembic_config(engine: Engine):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    # Alembic's Config is a ConfigParser: a bare "%" (a percent-encoded password, a "%" in
    # $HOME) would be read as interpolation and crash; "%%" stores one literal "%".
    url = engine.url.render_as_string(hide_password=False)
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def current_revision(engine: Engine) -> str | None:
    """The stamped revision, or None for an empty database (cheap: no Alembic import)."""
    with engine.connect() as conn:
        return _revision(conn)


def _revision(conn: Connection) -> str | None:
    from sqlalchemy import inspect

    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.exec_driver_sql("SELECT version_num FROM alembic_version").first()
    return None if row is None else str(row[0])


@contextlib.contextmanager
def _alembic_at_debug() -> Iterator[None]:
    """Alembic announces every plugin and revision at INFO (about 20 lines before a first
    banner); its lines are debugging detail here, shown only when DEBUG is on. The caller
    reports the outcome in one line."""
    alembic_log = logging.getLogger("alembic")
    before = alembic_log.level
    if not alembic_log.isEnabledFor(logging.DEBUG):
        alembic_log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        alembic_log.setLevel(before)


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade to `revision`; returns (before, after). Idempotent and serialized: the write
    lock is taken before the version table is read (BEGIN IMMEDIATE on SQLite, waiting up to
    the busy timeout; a transaction-scoped advisory lock on PostgreSQL, whose DDL is
    transactional), so of several concurrent upgrades one migrates and the others then find
    the schema current and change nothing."""
    from notes_server.store.engine import write_tx

    with _alembic_at_debug(), write_tx(engine) as conn:
        from alembic import command  # its plugins announce themselves when first imported

        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        before = _revision(conn)
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        after = _revision(conn)
    return before, after


def downgrade(engine: Engine, revision: str) -> None:
    with _alembic_at_debug(), engine.begin() as conn:
        from alembic import command

        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def check(engine: Engine) -> None:
    """Raise if the models and the migrations disagree (alembic check)."""
    from alembic import command

    with engine.begin() as conn:
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.check(cfg)


def sqlite_revision(path: Path) -> str | None:
    """The stamped revision of a SQLite file via the stdlib driver: no SQLAlchemy import, so the
    common "already migrated" start-up check costs about a millisecond."""
    import sqlite3

    if not path.exists():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return None if row is None else str(row[0])
