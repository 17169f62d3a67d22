"""Confining `notes-server serve` (both transports): what must exist first, and the exit."""

from __future__ import annotations

from pathlib import Path

from notes_server.cli.errors import StartupFailure
from notes_server.config import Settings


class SandboxRefused(StartupFailure):
    """`--sandbox require` could not be honoured, or its preparation failed: exit 2."""


def confine_serving(
    settings: Settings,
    *,
    transport: str,
    principal: str | None,
    extra_reads: tuple[Path, ...] = (),
    connect_ports: tuple[int, ...] | None = (),
) -> str:
    """Confine this process per `--sandbox`; return the banner's status.

    Call it before any extension code is imported and before any thread starts. A confined
    process can create no file, so the state key file is created here first (it is only read
    afterwards). When mirrored folders are configured (for `principal`, or for anyone when it
    is None), reads are confined too: to the runtime, the database, those folders (what
    notes_import reads), the key file and `extra_reads`. The folders are read once, here: a
    mirror configured later is readable after a restart. `connect_ports`: TCP ports an HTTP
    server may still connect to on embedded SQLite (None: any; `--auth oauth` fetches client
    metadata documents on 443, and anywhere with `--oauth-dev-addresses`).
    """
    from notes_server.security.keyring import KeyRing
    from notes_server.security.sandbox import SandboxUnavailable, confine, policy_for
    from notes_server.store.sqlite_file import hold_open_in_wal

    key_file = settings.state_key_file
    if settings.sandbox != "off" and not settings.state_keys and key_file is not None:
        try:
            KeyRing.load_or_create_file(key_file)
        except (OSError, ValueError) as exc:
            raise SandboxRefused(f"state key file: {exc}") from None
    mirrored = _mirrored(settings, principal) if settings.sandbox != "off" else []
    reads = None
    if mirrored:
        key = () if key_file is None else (key_file,)
        reads = (*mirrored, *key, *extra_reads)
    policy = policy_for(
        settings.sqlite_path, transport=transport, reads=reads, connect_ports=connect_ports
    )
    try:
        status = confine(settings.sandbox, policy, hold_database=hold_open_in_wal)
    except SandboxUnavailable as exc:
        raise SandboxRefused(f"--sandbox require: {exc}") from None
    if mirrored and status.startswith("sandbox landlock"):
        # The operator learns here that a mirror added later needs a restart.
        status += f" | reads: {len(mirrored)} mirrored folder(s) as of start"
    return status


def _mirrored(settings: Settings, principal: str | None) -> list[Path]:
    """The mirrored folders (of `principal`, or everyone's) a serving process may read."""
    from notes_server.cli.faults import database_faults

    with database_faults(settings.db_display):
        if settings.sqlite_path is not None:
            from notes_server.store.mirror_list import sqlite_mirror_folders

            mirrored = sqlite_mirror_folders(settings.sqlite_path, principal)
        else:
            from notes_server.store import folders
            from notes_server.store.engine import make_engine, read_tx

            engine = make_engine(settings.db_url, store_impl=settings.store_impl)
            try:
                with read_tx(engine) as conn:
                    mirrored = folders.mirror_folders(conn, principal)
            finally:
                engine.dispose()
    return [Path(folder) for folder in mirrored]
