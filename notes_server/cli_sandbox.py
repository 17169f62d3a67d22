"""Confining `notes-server serve` (both transports): what must exist first, and the exit."""

from __future__ import annotations

from notes_server.cli_errors import StartupFailure
from notes_server.config import Settings


class SandboxRefused(StartupFailure):
    """`--sandbox require` could not be honoured, or its preparation failed: exit 2."""


def confine_serving(settings: Settings, *, transport: str) -> str:
    """Confine this process per `--sandbox`; return the banner's status.

    Call it before any extension code is imported and before any thread starts. A confined
    process can create no file, so the state key file is created here first (it is only read
    afterwards).
    """
    from notes_server.security.keyring import KeyRing
    from notes_server.security.sandbox import SandboxUnavailable, confine, policy_for

    key_file = settings.state_key_file
    if settings.sandbox != "off" and not settings.state_keys and key_file is not None:
        try:
            KeyRing.load_or_create_file(key_file)
        except (OSError, ValueError) as exc:
            raise SandboxRefused(f"state key file: {exc}") from None
    try:
        return confine(settings.sandbox, policy_for(settings.sqlite_path, transport=transport))
    except SandboxUnavailable as exc:
        raise SandboxRefused(f"--sandbox require: {exc}") from None
