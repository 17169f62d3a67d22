"""Every store test runs on both repository implementations: the SQLite one (DB-API fast path)
and the portable Core one, forced on SQLite."""

from __future__ import annotations

import pytest

from tests import pg_support


# On PostgreSQL both names pick the same (Core) implementation: run it once.
@pytest.fixture(params=["auto"] if pg_support.on_postgresql() else ["auto", "core"])
def store_impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)
