"""Every store test runs on both repository implementations: the SQLite one (DB-API fast path)
and the portable Core one, forced on SQLite."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["auto", "core"])
def store_impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)
