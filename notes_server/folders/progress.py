"""How long commands report progress: a total once it is known, then bytes per file done."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, total: int) -> None:
        """``total`` files are about to be processed."""

    def advance(self, nbytes: int) -> None:
        """One file is done; it held ``nbytes`` bytes."""
