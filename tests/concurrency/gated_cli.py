"""`python gated_cli.py READY_FD GATE_FD ARGS...`: `notes-server ARGS...`, started on a signal.

The CLI is imported first; then one byte on READY_FD says "loaded", and the process blocks
reading GATE_FD until the test closes the gate's write end, which releases every waiting
process at once. A start barrier without sleeps.
"""

from __future__ import annotations

import os
import sys

from notes_server.cli.main import main

if __name__ == "__main__":
    ready, gate = int(sys.argv[1]), int(sys.argv[2])
    os.write(ready, b"r")
    os.close(ready)
    os.read(gate, 1)
    os.close(gate)
    main(args=sys.argv[3:], prog_name="notes-server")
