"""The database URL as a value: parsed once, at start, into what every consumer needs.

Before this, four places read a SQLite URL four ways (`sqlite+pysqlite:////srv/notes.db` made the
sandbox forget the database directory). Now `parse_database_url` is the only reader: the engine,
the sandbox, the key file and the banners all take their answer from the `DatabaseUrl` it returns.

SQLite URLs follow SQLAlchemy's grammar (`sqlite[+pysqlite]:///path[?query]`, the path
percent-decoded) and are parsed here without importing SQLAlchemy, which would cost ~120 ms of
cold start on every stdio launch. Any other backend is parsed by SQLAlchemy itself, imported only
then: such a server connects through SQLAlchemy at start anyway.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, unquote

SUPPORTED_BACKENDS = ("sqlite", "postgresql")
_SQLITE = re.compile(r"sqlite(?:\+(?P<driver>[A-Za-z0-9_]+))?://(?P<rest>.*)", re.DOTALL)
# Query keys of pysqlite URLs that change how SQLite opens the file, which would let the URL say
# one file and the driver open another (`uri=true` turns the path into a `file:` URI).
_SQLITE_REFUSED_KEYS = ("uri", "vfs", "modules")
# `scheme://user[:password]@`, the user-info part as SQLAlchemy's URL parser reads it.
_USERINFO = re.compile(r"[\w+]+://[^:/]*(?::[^@]*)?@")


class DatabaseUrlError(ValueError):
    """A database URL that cannot work; the message is safe to show (never the password)."""


class DatabaseUrl(NamedTuple):
    """What the rest of the server needs to know about its database, derived once. (An
    immutable record as a NamedTuple: a frozen dataclass compiles six methods at every start.)"""

    url: str
    backend: str
    sqlite_path: Path | None
    display: str

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"


@functools.lru_cache(maxsize=32)
def parse_database_url(raw: str) -> DatabaseUrl:
    """Parse and check a database URL; `DatabaseUrlError` says what is wrong with it."""
    if not isinstance(raw, str) or not raw.strip():
        raise DatabaseUrlError("the database URL is empty")
    if any(ord(c) < 0x20 or c == "\x7f" for c in raw):
        raise DatabaseUrlError("the database URL contains control characters")
    match = _SQLITE.fullmatch(raw)
    if match is not None:
        return _parse_sqlite(raw, match.group("driver"), match.group("rest"))
    if raw.startswith("sqlite:") or raw.startswith("sqlite+"):
        raise DatabaseUrlError("a SQLite URL looks like sqlite:////absolute/path/notes.db")
    return _parse_server_url(raw)


def _parse_sqlite(raw: str, driver: str | None, rest: str) -> DatabaseUrl:
    if driver not in (None, "pysqlite"):
        raise DatabaseUrlError(f"unsupported SQLite driver {driver!r}: use sqlite:/// (pysqlite)")
    if rest and not rest.startswith("/"):
        raise DatabaseUrlError("a SQLite URL has no host: write sqlite:////absolute/path/notes.db")
    path_part, _, query = rest[1:].partition("?")
    keys = {item.partition("=")[0] for item in query.split("&") if item}
    refused = sorted(keys.intersection(_SQLITE_REFUSED_KEYS))
    if refused:
        raise DatabaseUrlError(f"SQLite URL option {refused[0]!r} is not supported")
    database = unquote(path_part)
    if not database or database == ":memory:":
        # Every pooled connection would see its own empty database: nothing would persist.
        raise DatabaseUrlError("an in-memory SQLite database cannot serve: give a file path")
    if "\x00" in database:
        raise DatabaseUrlError("the SQLite path contains a NUL character")
    path = Path(database).absolute()
    url = f"sqlite:///{quote(str(path), safe='/')}" + (f"?{query}" if query else "")
    return DatabaseUrl(url=url, backend="sqlite", sqlite_path=path, display=raw)


def _parse_server_url(raw: str) -> DatabaseUrl:
    from sqlalchemy.engine.url import make_url  # only for server databases; see module doc
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(raw)
    except (ArgumentError, ValueError):
        raise DatabaseUrlError(
            "the database URL is not a URL SQLAlchemy understands "
            "(e.g. postgresql+psycopg://user@host/dbname)"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED_BACKENDS:
        raise DatabaseUrlError(
            f"unsupported database backend {backend!r} (supported: {', '.join(SUPPORTED_BACKENDS)})"
        )
    return DatabaseUrl(url=raw, backend=backend, sqlite_path=None, display=_without_userinfo(raw))


def _without_userinfo(url: str) -> str:
    """The URL with its whole user-info part masked: a user name can be a secret too, and a
    password may hold characters (`/`, `@`) that SQLAlchemy's own renderer would not find."""
    if _USERINFO.match(url):
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url
