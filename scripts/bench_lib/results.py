"""The figures a run produces, as plain data: table rows, side tables, plot samples, notes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bench_lib.common import Measure


@dataclass
class Row:
    """One line of the main table: the same measurement for notes-server and the SDK peer."""

    section: str
    name: str
    unit: str
    higher_is_better: bool
    ours: Measure
    peer: Measure | None = None
    target: str = ""
    target_factor: float | None = None  # e.g. 4.0 = ours must be >= 4x better than the peer
    note: str = ""

    @property
    def advantage(self) -> float | None:
        """How many times better ours is (>1: ours better), from the medians."""
        if self.peer is None or not self.peer.trials or not self.ours.trials:
            return None
        ours, peer = self.ours.median, self.peer.median
        if ours <= 0 or peer <= 0:
            return None
        return ours / peer if self.higher_is_better else peer / ours

    @property
    def peer_over_ours(self) -> float | None:
        if self.peer is None or not self.peer.trials or not self.ours.trials:
            return None
        return self.peer.median / self.ours.median if self.ours.median else None

    @property
    def met(self) -> bool | None:
        if self.target_factor is None or self.advantage is None:
            return None
        return self.advantage >= self.target_factor


@dataclass
class Check:
    """A target that is not a peer ratio (e.g. overhead vs echo, p50 under 5 ms)."""

    target: str
    value: str
    met: bool | None


@dataclass
class Results:
    quick: bool
    smoke: bool = False
    rows: list[Row] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    tables: dict[str, tuple[list[str], list[list[str]]]] = field(default_factory=dict)
    memory: list[tuple[str, int | None, int | None]] = field(default_factory=list)
    plots: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def row(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def plot(self, panel: str, impl: str, samples: list[float]) -> None:
        self.plots.setdefault(panel, {}).setdefault(impl, []).extend(samples)


def fmt(value: float | None, digits: int = 3) -> str:
    """Three significant figures, no exponent for the ranges we print."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"
