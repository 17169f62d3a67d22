"""Settings: built once at the edge (CLI), then passed down. The only reader of NOTES_SERVER_*."""

from __future__ import annotations

import dataclasses
import getpass
import ipaddress
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from notes_server.dburl import DatabaseUrl, DatabaseUrlError, parse_database_url

ENV_DB = "NOTES_SERVER_DB"
ENV_PRINCIPAL = "NOTES_SERVER_PRINCIPAL"
ENV_STATE_KEYS = "NOTES_SERVER_STATE_KEYS"
ENV_STATE_AUDIENCE = "NOTES_SERVER_STATE_AUDIENCE"
ENV_LOG_LEVEL = "NOTES_SERVER_LOG_LEVEL"
ENV_ROOTS_WAIT = "NOTES_SERVER_ROOTS_WAIT"
ENV_PAUSE_AT = "NOTES_SERVER_TEST_PAUSE_AT"
# "core" makes every repository use its portable Core implementation, even on SQLite (tests).
ENV_STORE_IMPL = "NOTES_SERVER_STORE_IMPL"
STORE_IMPLS = ("auto", "core")
# Semantic search: "auto" uses the `semantic` extra when it is installed, "on" requires it,
# "off" never loads it (keyword only).
ENV_SEMANTIC = "NOTES_SERVER_SEMANTIC"
SEMANTIC_MODES = ("auto", "on", "off")
# Seconds between a serving indexer's looks for writes of other processes (its own process's
# writes wake it at once); unset: store.indexer's defaults.
ENV_INDEX_POLL = "NOTES_SERVER_INDEX_POLL"
INDEX_POLL_RANGE = (0.05, 3600.0)
# Set by `serve --transport http` for its worker processes; not meant to be set by hand.
ENV_WORKER_CONFIG = "NOTES_SERVER_WORKER_CONFIG"
DEFAULT_STATE_TTL = 300.0


def data_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/notes-server`, else `~/.local/share/notes-server`."""
    xdg = env.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "notes-server"


def default_db_url(env: Mapping[str, str]) -> str:
    """The embedded database's URL, percent-encoded: a "%" in $HOME is part of the path."""
    return f"sqlite:///{quote(str(data_dir(env) / 'notes.db'), safe='/')}"


def os_login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


@dataclass(frozen=True)
class Settings:
    """Everything configurable, resolved once. Secrets are kept out of repr."""

    db_url: str
    db_is_default: bool = False
    principal: str = "local"
    state_keys: str | None = field(default=None, repr=False)
    state_ttl: float = DEFAULT_STATE_TTL
    # Names this deployment in requestState when its database URL does not (see state_audience).
    state_audience_name: str | None = None
    log_level: str = "INFO"
    tools_modules: tuple[str, ...] = ()
    sandbox: str = "auto"
    # Crash-safety tests only: block forever at this named point of a confirmed mutation.
    pause_at: str | None = None
    # Which repository implementations the engine uses (see store.engine.uses_driver).
    store_impl: str = "auto"
    semantic: str = "auto"
    index_poll_s: float | None = None
    # Seconds to wait for a 2025-era client's roots/list answer
    # (None: compat_2025.roots.ROOTS_WAIT_S).
    roots_wait_s: float | None = None

    @property
    def database(self) -> DatabaseUrl:
        """The parsed database URL (parsed once per URL; `build_settings` already checked it)."""
        return parse_database_url(self.db_url)

    @property
    def sqlite_path(self) -> Path | None:
        """The database file for a SQLite URL (absolute), else None."""
        return self.database.sqlite_path

    @property
    def state_key_file(self) -> Path | None:
        """Where the shared key file lives when no keys are configured (beside the SQLite db)."""
        db = self.sqlite_path
        return None if db is None else db.with_name(db.name + ".state-keys")

    @property
    def db_display(self) -> str:
        """The database URL without credentials, for banners and logs."""
        return self.database.display

    @property
    def state_audience(self) -> str:
        """Who a sealed requestState is for: this deployment, named by `state_audience_name` or
        else by its database (every worker and instance on one database shares it; another
        deployment with the same state keys does not). Credentials never enter it."""
        if self.state_audience_name is not None:
            return self.state_audience_name
        db = self.database
        identity = f"sqlite:{db.sqlite_path}" if db.sqlite_path is not None else db.display
        from hashlib import sha256  # not at start: hashlib loads OpenSSL (~2.5 ms)

        return "notes-server/" + sha256(identity.encode("utf-8")).hexdigest()[:32]


class SettingsError(ValueError):
    """A setting the server cannot run with. The CLI prints the message as one line and exits 2;
    messages name the setting, never a secret's value."""


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_AUDIENCE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:/")


def _checked_audience(raw: str | None) -> str | None:
    """An operator-chosen deployment name: 1-128 characters of [A-Za-z0-9-._:/]."""
    if raw is None or raw == "":
        return None
    if len(raw) > 128 or not set(raw) <= _AUDIENCE_CHARS:
        raise SettingsError(
            f"{ENV_STATE_AUDIENCE}: expected 1-128 characters of letters, digits and -._:/"
        )
    return raw


ROOTS_WAIT_RANGE = (0.1, 3600.0)


def _checked_roots_wait(raw: str | None) -> float | None:
    """Seconds, from 0.1 to 3600; unset or empty keeps the default."""
    return _checked_seconds(raw, ENV_ROOTS_WAIT, ROOTS_WAIT_RANGE)


def _checked_seconds(raw: str | None, name: str, bounds: tuple[float, float]) -> float | None:
    if raw is None or raw.strip() == "":
        return None
    low, high = bounds
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not low <= seconds <= high:  # NaN fails too
        raise SettingsError(f"{name}: expected seconds from {low:g} to {high:g}")
    return seconds


def _checked_db(raw: str, source: str) -> str:
    try:
        parsed = parse_database_url(raw)
    except DatabaseUrlError as exc:
        raise SettingsError(f"{source}: {exc}") from None
    # SQLite would open a directory and fail later as "disk I/O error"; say what is wrong.
    if parsed.sqlite_path is not None and parsed.sqlite_path.is_dir():
        raise SettingsError(f"{source}: {parsed.display} is a directory, not a database file")
    return parsed.url


def resolve_db(db: str | None, env: Mapping[str, str]) -> tuple[str, bool]:
    """--db, else NOTES_SERVER_DB, else the embedded default; returns (url, is_default)."""
    if db:
        return db, False
    if env.get(ENV_DB):
        return env[ENV_DB], False
    return default_db_url(env), True


def build_settings(
    *,
    db: str | None = None,
    principal: str | None = None,
    state_ttl: float | None = None,
    tools_modules: tuple[str, ...] = (),
    sandbox: str = "auto",
    env: Mapping[str, str] | None = None,
) -> Settings:
    """The one constructor used by the CLI; tests pass `env` explicitly."""
    env = os.environ if env is None else env
    url, is_default = resolve_db(db, env)
    source = "--db" if db else ENV_DB if not is_default else "the embedded database path"
    log_level = env.get(ENV_LOG_LEVEL, "INFO").strip().upper()
    if log_level not in _LOG_LEVELS:
        raise SettingsError(f"{ENV_LOG_LEVEL}: expected one of {', '.join(_LOG_LEVELS)}")
    store_impl = env.get(ENV_STORE_IMPL) or "auto"
    if store_impl not in STORE_IMPLS:
        raise SettingsError(f"{ENV_STORE_IMPL}: expected one of {', '.join(STORE_IMPLS)}")
    semantic = (env.get(ENV_SEMANTIC) or "auto").strip().lower()
    if semantic not in SEMANTIC_MODES:
        raise SettingsError(f"{ENV_SEMANTIC}: expected one of {', '.join(SEMANTIC_MODES)}")
    return Settings(
        db_url=_checked_db(url, source),
        db_is_default=is_default,
        principal=principal or env.get(ENV_PRINCIPAL) or os_login(),
        state_keys=env.get(ENV_STATE_KEYS) or None,
        state_ttl=DEFAULT_STATE_TTL if state_ttl is None else state_ttl,
        state_audience_name=_checked_audience(env.get(ENV_STATE_AUDIENCE)),
        log_level=log_level,
        tools_modules=tools_modules,
        pause_at=env.get(ENV_PAUSE_AT) or None,
        sandbox=sandbox,
        store_impl=store_impl,
        semantic=semantic,
        roots_wait_s=_checked_roots_wait(env.get(ENV_ROOTS_WAIT)),
        index_poll_s=_checked_seconds(env.get(ENV_INDEX_POLL), ENV_INDEX_POLL, INDEX_POLL_RANGE),
    )


@dataclass(frozen=True)
class HttpSettings:
    """How `serve --transport http` listens, authenticates and bounds requests."""

    host: str = "127.0.0.1"
    port: int = 8765
    workers: int = 1
    auth: str = "token"
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks: str | None = None
    jwt_client_ids: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    public_url: str | None = None
    # `--auth oauth`: dynamic client registration (RFC 7591) "open" or "off".
    registration: str = "open"
    # `--auth oauth`: Client ID Metadata Documents may be on loopback/private addresses (dev).
    oauth_dev_addresses: bool = False
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 30.0

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect: DNS-rebinding checks apply to Host."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False


_D = TypeVar("_D")


def _restore(cls: type[_D], values: dict[str, Any], **extra: Any) -> _D:
    """Rebuild a settings dataclass from JSON (lists back to tuples); unknown keys fail."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if not values.keys() <= known:
        raise ValueError(f"unknown {cls.__name__} fields: {sorted(values.keys() - known)}")
    plain = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return cls(**plain, **extra)


def export_worker_config(settings: Settings, http: HttpSettings) -> None:
    """Hand the resolved settings to worker processes, which uvicorn spawns with this process's
    environment. Secrets stay where they came from: the state keys are read from
    NOTES_SERVER_STATE_KEYS again by each worker, never copied into another variable."""
    plain = dataclasses.asdict(settings)
    del plain["state_keys"]
    payload = {"settings": plain, "http": dataclasses.asdict(http)}
    os.environ[ENV_WORKER_CONFIG] = json.dumps(payload)


def worker_config(env: Mapping[str, str] | None = None) -> tuple[Settings, HttpSettings]:
    """The settings exported by `export_worker_config` (in a worker process)."""
    env = os.environ if env is None else env
    raw = env.get(ENV_WORKER_CONFIG)
    if not raw:
        raise RuntimeError(f"{ENV_WORKER_CONFIG} is not set: start workers with `serve`")
    payload = json.loads(raw)
    settings = _restore(Settings, payload["settings"], state_keys=env.get(ENV_STATE_KEYS) or None)
    return settings, _restore(HttpSettings, payload["http"])
