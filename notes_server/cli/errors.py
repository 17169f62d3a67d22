"""The one exit for what an operator must fix before the server can run: one line, status 2.

Bad settings, an unusable database, a sandbox that `require` cannot get, an unsafe HTTP setup:
each reaches the operator as `notes-server: error: <what and why>` on stderr, never a traceback.
"""

from __future__ import annotations

from typing import IO, Any

import click


class StartupFailure(click.ClickException):
    """Raised by CLI code (or translated into) for a start-up problem; exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"notes-server: error: {self.format_message()}", file=file, err=True)
