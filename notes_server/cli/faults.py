"""One place where a database the CLI cannot use becomes one operator line and exit status 2.

A garbage file, a read-only directory, a full disk, an unreachable server or a missing driver
is the environment, not a bug: the operator gets what failed and why, never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

import click

from notes_server.cli.errors import StartupFailure


class DatabaseUnavailable(StartupFailure):
    """The database cannot be used; `notes-server: error: ...` on stderr, exit status 2."""


def fault_cause(exc: BaseException) -> str | None:
    """Why the database cannot be used, in words for the operator; None for a genuine bug."""
    from notes_server.store.faults import database_fault, unusable_url_cause

    fault = database_fault(exc)
    if fault is not None:
        return fault.cause
    refused_url = unusable_url_cause(exc)
    if refused_url is not None:
        return refused_url
    if isinstance(exc, ModuleNotFoundError):
        return f"its database driver is not installed ({exc})"
    if isinstance(exc, OSError):  # its directory, or the state key file beside it
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return "the disk is full"
        return exc.strerror or type(exc).__name__
    return None


@contextlib.contextmanager
def database_faults(display: str) -> Iterator[None]:
    """Around everything a command does with the database named `display` (credentials
    already hidden): a fault leaves as DatabaseUnavailable, anything else unchanged."""
    try:
        yield
    except click.ClickException:
        raise
    except Exception as exc:
        cause = fault_cause(exc)
        if cause is None:
            raise
        raise DatabaseUnavailable(f"cannot use the database {display}: {cause}") from None
