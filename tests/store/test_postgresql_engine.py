"""The engine on a PostgreSQL server: a pool sized for the HTTP worker threads, a statement
timeout on every session, and transient failures (40001/40P01) retried, anything else not."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from notes_server.store import engine as store_engine
from notes_server.store.engine import read_tx, retrying
from notes_server.store.faults import is_transient
from notes_server.transports.http.threads import WORKER_THREADS


class _DriverError(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(f"driver error {sqlstate}")
        self.sqlstate = sqlstate


def _wrapped(sqlstate: str | None) -> OperationalError:
    return OperationalError("UPDATE notes ...", {}, _DriverError(sqlstate))


def test_postgresql_sessions_run_under_the_statement_timeout(pg_engine: Engine) -> None:
    with read_tx(pg_engine) as conn:
        shown = conn.execute(text("SHOW statement_timeout")).scalar_one()
    assert shown == f"{store_engine.STATEMENT_TIMEOUT_MS // 1000}s"


def test_a_statement_over_the_timeout_is_cancelled_by_the_server(pg_engine: Engine) -> None:
    with read_tx(pg_engine) as conn:
        conn.execute(text("SET LOCAL statement_timeout = 50"))
        with pytest.raises(OperationalError) as caught:
            conn.execute(text("SELECT pg_sleep(5)"))
    assert getattr(caught.value.orig, "sqlstate", None) == "57014"


def test_the_postgresql_pool_holds_a_connection_per_worker_thread(pg_engine: Engine) -> None:
    assert pg_engine.pool.size() >= WORKER_THREADS


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])
def test_a_transaction_that_fails_transiently_is_run_again(
    sqlstate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_engine, "RETRY_BASE_DELAY", 0.0)
    attempts: list[int] = []

    def body() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise _wrapped(sqlstate)
        return "done"

    assert is_transient(_wrapped(sqlstate))
    assert retrying(body) == "done"
    assert len(attempts) == 3


def test_retries_are_bounded_and_other_failures_are_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_engine, "RETRY_BASE_DELAY", 0.0)
    attempts: list[str] = []

    def always(sqlstate: str | None) -> None:
        attempts.append("x")
        raise _wrapped(sqlstate)

    with pytest.raises(OperationalError):
        retrying(lambda: always("40001"), attempts=4)
    assert len(attempts) == 4
    attempts.clear()
    with pytest.raises(OperationalError):
        retrying(lambda: always("23505"))  # a unique violation is a bug, not contention
    with pytest.raises(OperationalError):
        retrying(lambda: always(None))  # a lost connection: the request fails, once
    assert len(attempts) == 2
