"""UTC timestamps as a column type: aware datetimes in, aware UTC datetimes out, every backend.

The columns are declared `DateTime(timezone=True)`. SQLite has no time zones: it keeps the text
SQLAlchemy writes for a naive value ("2026-03-01 12:30:15.123456"), so this type stores the UTC
wall time there, exactly as before (no migration; old databases read back the same), and marks
values read back as UTC. PostgreSQL gets an aware value for its timestamptz. A naive datetime is
refused on the way in: it would mean "some zone", and PostgreSQL would read it as server-local.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime column (naive values are refused, never guessed)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return to_stored(value, naive=dialect.name == "sqlite")

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return from_stored(value)


def to_stored(value: datetime, *, naive: bool) -> datetime:
    """The UTC value to send to the database; naive UTC wall time for SQLite."""
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timestamps must be timezone-aware datetimes, got {value!r}")
    value = value.astimezone(UTC)
    return value.replace(tzinfo=None) if naive else value


def from_stored(value: Any) -> datetime | None:
    """An aware UTC datetime from what a driver returned: ISO text (SQLite through the DB-API),
    a naive UTC datetime (SQLite through SQLAlchemy) or an aware one (PostgreSQL)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
    return value.astimezone(UTC)  # type: ignore[no-any-return]
