"""UTC timestamps as a column type: aware datetimes in, aware UTC datetimes out, every backend.

The columns are declared `DateTime(timezone=True)`. SQLite has no time zones: it keeps the text
SQLAlchemy writes from the wall-time fields ("2026-03-01 12:30:15.123456"), so this type sends the
UTC value and SQLite keeps exactly the text it kept before (no migration; old databases read back
the same), and values read back are marked UTC. PostgreSQL gets an aware value for timestamptz.
A naive datetime is refused on the way in: it would mean "some zone", and PostgreSQL would read
it in the server's zone.
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
        return to_stored(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return from_stored(value)


def to_stored(value: datetime) -> datetime:
    """The aware UTC value to send to the database. SQLAlchemy's SQLite DATETIME writes only
    the wall-time fields, so SQLite gets the same text a naive UTC value gave."""
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timestamps must be timezone-aware datetimes, got {value!r}")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def from_stored(value: Any) -> datetime | None:
    """An aware UTC datetime from what a driver returned: ISO text (SQLite through the DB-API),
    a naive UTC datetime (SQLite through SQLAlchemy) or an aware one (PostgreSQL)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:  # SQLite text has no offset; parsing it with one is the fast way to an aware value
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:
            value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
    if value.tzinfo is UTC:
        return value  # type: ignore[no-any-return]
    return value.astimezone(UTC)  # type: ignore[no-any-return]
