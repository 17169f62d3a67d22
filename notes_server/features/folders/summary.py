"""What an import, export or sync did, for a person (lines) or a program (JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INTERRUPTED = "interrupted: stopped after the current file; run the command again to finish"
ACTIONS = ("imported", "updated", "unchanged", "exported", "deleted", "skipped", "refused")


@dataclass
class Summary:
    """Counts per action, plus every skipped, refused or conflicting path with its reason."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ACTIONS, 0))
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    bytes_read: int = 0
    interrupted: bool = False  # stopped early (Ctrl-C): the counts are what was committed

    def count(self, action: str) -> None:
        self.counts[action] += 1

    def refuse(self, path: str, reason: str) -> None:
        self.counts["refused"] += 1
        self.problems.append(("refused", path, reason))

    def skip(self, path: str, reason: str) -> None:
        self.counts["skipped"] += 1
        self.problems.append(("skipped", path, reason))

    def conflict(self, path: str, kept_as: str) -> None:
        self.conflicts.append((path, kept_as))

    def as_json(self, *, dry_run: bool = False) -> dict[str, Any]:
        shape = {
            "dryRun": dry_run,
            **self.counts,
            "problems": [{"action": a, "path": p, "reason": r} for a, p, r in self.problems],
            "conflicts": [{"path": p, "keptAs": k} for p, k in self.conflicts],
        }
        return {**shape, "interrupted": True} if self.interrupted else shape

    def lines(self, *, dry_run: bool = False) -> list[str]:
        done = ", ".join(f"{n} {a}" for a, n in self.counts.items() if n)
        idle = "nothing committed" if self.interrupted else "nothing to do"
        head = ("dry run: would have " if dry_run else "") + (done or idle)
        out = [head]
        out += [f"{action}: {path}: {reason}" for action, path, reason in self.problems]
        out += [f"conflict: {path}: both sides changed; kept {k}" for path, k in self.conflicts]
        if self.interrupted:
            out.append(INTERRUPTED)
        return out
