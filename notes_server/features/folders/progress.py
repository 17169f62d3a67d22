"""How long commands report progress (a total once it is known, then bytes per file done),
and how they are asked to stop early (Ctrl-C: after the current file)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, total: int) -> None:
        """``total`` files are about to be processed."""

    def advance(self, nbytes: int) -> None:
        """One file is done; it held ``nbytes`` bytes."""


class Stop(Protocol):
    """Set when the person asked to stop (a `threading.Event` is one); the folder loops look
    at it between files and commit what they did."""

    def is_set(self) -> bool: ...


def stopping(stop: Stop | None) -> bool:
    return stop is not None and stop.is_set()
