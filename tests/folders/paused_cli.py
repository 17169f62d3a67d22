"""`python paused_cli.py N GATE_FD ARGS...`: `notes-server ARGS...` that, at the N-th file it
counts (imported, exported, unchanged, ..., or refused while reading the folder), says
`paused at N` on stderr and then blocks reading GATE_FD until the test closes the gate's write
end. The test sends SIGINT while the command is held in the middle of its work: a point to
interrupt at without sleeping."""

from __future__ import annotations

import os
import sys

from notes_server.cli.main import main
from notes_server.features.folders.summary import Summary

if __name__ == "__main__":
    at, gate = int(sys.argv[1]), int(sys.argv[2])
    original_count, original_refuse = Summary.count, Summary.refuse
    seen = [0]

    def hold() -> None:
        seen[0] += 1
        if seen[0] == at:
            os.write(2, f"paused at {at}\n".encode())
            os.read(gate, 1)  # a SIGINT meanwhile runs the command's handler, then reads on

    def count(self: Summary, action: str) -> None:
        original_count(self, action)
        hold()

    def refuse(self: Summary, path: str, reason: str) -> None:
        original_refuse(self, path, reason)
        hold()

    Summary.count = count  # type: ignore[method-assign]
    Summary.refuse = refuse  # type: ignore[method-assign]
    main(args=sys.argv[3:], prog_name="notes-server")
