"""Alembic environment: uses a connection handed over by notes_server.store.migrate when present."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from notes_server.config import build_settings
from notes_server.store.engine import make_engine
from notes_server.store.models import (
    FTS_TABLE,
    SCOPE_TABLE,
    SEARCH_VECTOR,
    SEARCH_VECTOR_INDEX,
    TRIGRAM_INDEXES,
    metadata,
)

target_metadata = metadata


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """The full-text indexes are managed by raw SQL, not by models: SQLite's FTS5 virtual table
    and its shadow tables (the trigram table too) and, since 0025, their workspace scope keys,
    PostgreSQL's tsvector column and the GIN indexes (tsvector, pg_trgm)."""
    if (
        type_ == "table"
        and name is not None
        and (name.startswith(FTS_TABLE) or name == SCOPE_TABLE)
    ):
        return False
    return not (
        (type_ == "column" and name == SEARCH_VECTOR)
        or (type_ == "index" and (name == SEARCH_VECTOR_INDEX or name in TRIGRAM_INDEXES))
    )


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run(connection)
        return
    engine = make_engine(build_settings().db_url)
    with engine.connect() as conn:
        run(conn)


main()
