"""Fixtures for the 2025-11-25 adapter: a real `serve` process on a migrated database where
alice holds a write grant, driven by legacy_support.LegacyClient."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from notes_server.security.keyring import KeyRing
from tests.compat_2025.legacy_support import NOTES, Legacy, LegacyClient
from tests.helpers import ServerProcess


@pytest.fixture
def legacy(spawn_server: Callable[..., ServerProcess], grant: Callable[..., str]) -> Legacy:
    """legacy() starts a server on the migrated test database (alice may write NOTES)."""
    grant("alice", NOTES)
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}

    def _start() -> LegacyClient:
        return LegacyClient(spawn_server(env=env))

    return _start
