"""The Apps tests reuse the HTTP test support (a real `serve --transport http` process)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "transports"))
