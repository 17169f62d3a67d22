"""The database a CLI command works on: resolved from settings, schema checked (or, for the
embedded default, created), faults reported as one line. Shared by every command module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from notes_server.cli.errors import StartupFailure
from notes_server.cli.faults import database_faults
from notes_server.config import Settings, build_settings

if TYPE_CHECKING:
    from sqlalchemy import Engine


def ensure_schema(settings: Settings, *, announce: bool = False) -> None:
    """Migrate the embedded default database on first use; refuse to run others unmigrated.
    A database that cannot be used is one line and exit status 2."""
    with database_faults(settings.db_display):
        _ensure_schema(settings, announce=announce)


def _ensure_schema(settings: Settings, *, announce: bool) -> None:
    from notes_server.store.migrate import HEAD, sqlite_revision

    path = settings.sqlite_path
    if path is not None and sqlite_revision(path) == HEAD:
        return
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    existed = path is None or path.exists()
    engine = make_engine(settings.db_url, store_impl=settings.store_impl)
    try:
        current = migrate.current_revision(engine)
        if current == HEAD:
            return
        if not settings.db_is_default:
            engine.dispose()
            if not existed:
                from notes_server.store.sqlite_file import remove_if_empty

                remove_if_empty(path)
            raise _unmigrated(current)
        # Serialized: when several processes start on a fresh database, one creates the
        # schema and the others wait for it, then find it current.
        before, after = migrate.upgrade(engine)
        if announce and before != after:
            click.echo(
                f"database migrated to {after} (was {before or 'empty'}): {settings.db_display}",
                err=True,
            )
    finally:
        engine.dispose()


def _unmigrated(current: str | None) -> StartupFailure:
    from notes_server.store.migrate import HEAD

    return StartupFailure(
        f"database schema is at {current or 'nothing'}, not {HEAD}: "
        "run `notes-server migrate --db URL` first"
    )


@contextlib.contextmanager
def open_database(db: str | None, *, announce: bool = False) -> Iterator[Engine]:
    """The engine of the database a command names (--db, env, or the embedded default), its
    schema checked or, for the embedded default, created; disposed when the command is done.
    A database fault anywhere inside is one line and exit status 2."""
    from notes_server.store.engine import make_engine

    settings = build_settings(db=db)
    ensure_schema(settings, announce=announce)
    with database_faults(settings.db_display):
        engine = make_engine(settings.db_url, store_impl=settings.store_impl)
        try:
            yield engine
        finally:
            engine.dispose()
