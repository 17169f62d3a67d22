"""The Apps tests reuse the HTTP test support (a real `serve --transport http` process)."""

from __future__ import annotations
