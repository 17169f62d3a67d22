"""The legacy HTTP session repository: principal scoping, one answer per question, expiry and
pruning, and cancellation markers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from notes_server.store.sessions import QuestionState, SessionRecord, SqlLegacySessions

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
TTL = timedelta(hours=24)


def record(principal: str = "alice", expires: datetime = NOW + TTL) -> SessionRecord:
    return SessionRecord(principal, "2025-11-25", "{}", None, expires)


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_session_is_found_only_by_its_principal_and_only_before_it_expires(
    migrated_engine: Engine,
) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.create("h1", record(), NOW)

    assert repo.lookup("h1", "alice", NOW) is not None
    assert repo.lookup("h1", "bob", NOW) is None
    assert repo.lookup("h1", "alice", NOW + TTL) is None
    assert repo.end("h1", "bob") is False
    assert repo.end("h1", "alice") is True


def test_expired_sessions_and_questions_are_pruned_when_a_session_starts(
    migrated_engine: Engine,
) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.create("old", record(expires=NOW + timedelta(minutes=1)), NOW)
    assert repo.ask("old", "s-1", "k", NOW + timedelta(minutes=1))

    repo.create("new", record(expires=NOW + TTL * 2), NOW + TTL)

    assert count(migrated_engine, "legacy_sessions") == 1
    assert count(migrated_engine, "legacy_questions") == 0


def test_only_the_first_answer_to_an_open_question_counts(migrated_engine: Engine) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    assert repo.ask("h", "s-1", "k", NOW + timedelta(minutes=5))

    first = repo.answer("h", "s-1", '{"first":1}', NOW)
    second = repo.answer("h", "s-1", '{"second":2}', NOW)
    unknown = repo.answer("h", "s-2", "{}", NOW)
    other_session = repo.answer("h2", "s-1", "{}", NOW)

    assert (first, second, unknown, other_session) == (True, False, False, False)
    answer = repo.poll("h", "s-1")
    assert answer is not None and answer.response_json == '{"first":1}'


def test_an_answer_after_the_question_expired_is_refused(migrated_engine: Engine) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    assert repo.ask("h", "s-1", "k", NOW)

    assert repo.answer("h", "s-1", "{}", NOW + timedelta(seconds=1)) is False


def test_a_cancel_before_any_question_prevents_asking_one(migrated_engine: Engine) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.cancel("h", "k", NOW + timedelta(minutes=5))
    repo.cancel("h", "k", NOW + timedelta(minutes=5))

    assert repo.ask("h", "s-1", "k", NOW + timedelta(minutes=5)) is False
    assert repo.ask("h", "s-2", "other", NOW + timedelta(minutes=5)) is True


def test_a_cancel_marks_the_open_questions_of_that_call(migrated_engine: Engine) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    assert repo.ask("h", "s-1", "k", NOW + timedelta(minutes=5))

    repo.cancel("h", "k", NOW + timedelta(minutes=5))

    answer = repo.poll("h", "s-1")
    assert answer is not None and answer.cancelled


def test_a_cancel_that_lands_after_the_answer_still_stops_the_next_question(
    migrated_engine: Engine,
) -> None:
    """The answer is read, the cancellation marks the still-open question, then the question
    is closed: the call's next question (another round, or the wait on a page) is not asked."""
    repo = SqlLegacySessions(migrated_engine, TTL)
    assert repo.ask("h", "s-1", "k", NOW + timedelta(minutes=5))
    assert repo.answer("h", "s-1", '{"result":{"action":"accept"}}', NOW)

    repo.cancel("h", "k", NOW + timedelta(minutes=5))
    repo.close("h", "s-1")

    assert repo.ask("h", "page-1", "k", NOW + timedelta(minutes=5)) is False
    assert repo.ask("h", "s-2", "other", NOW + timedelta(minutes=5)) is True


def test_a_question_recorded_beside_a_concurrent_cancel_still_polls_as_cancelled(
    migrated_engine: Engine,
) -> None:
    """Under READ COMMITTED, `ask` can check for a cancellation, then `cancel` marks nothing
    (the new row is not committed yet) and leaves its marker, then `ask` commits its row
    unmarked. The row written here is that committed state; polling it must end the wait."""
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.cancel("h", "k", NOW + timedelta(minutes=5))
    with migrated_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO legacy_questions (session_hash, request_id, client_request,"
                " response_json, cancelled, expires_at) VALUES ('h', 'page-1', 'k', NULL,"
                " false, :expires)"
            ),
            {"expires": NOW + timedelta(minutes=5)},
        )

    answer = repo.poll("h", "page-1")

    assert answer is not None and answer.cancelled
    other = repo.ask("h", "s-9", "other", NOW + timedelta(minutes=5))
    assert other and repo.poll("h", "s-9") == QuestionState(None, False)


def test_finding_a_session_moves_its_expiry_forward_only_when_due(
    migrated_engine: Engine,
) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.create("due", record(expires=NOW + timedelta(hours=1)), NOW)
    repo.create("fresh", record(expires=NOW + TTL), NOW)
    later = NOW + timedelta(minutes=1)

    found_due = repo.lookup("due", "alice", later)
    found_fresh = repo.lookup("fresh", "alice", later)
    for key, found in (("due", found_due), ("fresh", found_fresh)):
        if found is not None and repo.refresh_due(found, later):  # as the transport does
            repo.refresh(key, later)

    assert found_due is not None and found_due.expires_at == NOW + timedelta(hours=1)
    assert found_fresh is not None and found_fresh.expires_at == NOW + TTL
    due_now = repo.lookup("due", "alice", later)
    fresh_now = repo.lookup("fresh", "alice", later)
    assert due_now is not None and due_now.expires_at == later + TTL
    assert fresh_now is not None and fresh_now.expires_at == NOW + TTL
    assert repo.refresh_due(due_now, later) is False


def test_a_session_read_is_quick_only_on_embedded_sqlite_through_the_driver(
    migrated_engine: Engine, store_impl: str
) -> None:
    """Only then may the transport run session lookups and polls on its event loop."""
    repo = SqlLegacySessions(migrated_engine, TTL)
    embedded = migrated_engine.dialect.name == "sqlite" and store_impl == "auto"

    assert repo.runs_on_loop is embedded


def test_past_the_cap_a_new_session_ends_the_principals_least_recently_used(
    migrated_engine: Engine,
) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL, max_per_principal=3)
    for i in range(3):
        repo.create(f"a{i}", record(expires=NOW + TTL + timedelta(minutes=i)), NOW)
    assert repo.ask("a0", "s-1", "k", NOW + timedelta(minutes=5))
    repo.create("b0", record("bob"), NOW)
    repo.refresh("a0", NOW + timedelta(minutes=10))  # used again: now the most recent

    repo.create("a3", record(expires=NOW + TTL + timedelta(minutes=3)), NOW)

    alive = [h for h in ("a0", "a1", "a2", "a3") if repo.lookup(h, "alice", NOW)]
    assert alive == ["a0", "a2", "a3"]
    assert repo.lookup("b0", "bob", NOW) is not None  # another principal's are not counted
    assert count(migrated_engine, "legacy_questions") == 1  # a0's question stays with it


def test_a_sweep_deletes_expired_sessions_questions_and_cancellation_markers(
    migrated_engine: Engine,
) -> None:
    repo = SqlLegacySessions(migrated_engine, TTL)
    repo.create("live", record(expires=NOW + TTL), NOW)
    for i in range(250):  # more than one pruning batch
        repo.create(f"old{i}", record(f"p{i}", expires=NOW + timedelta(minutes=1)), NOW)
    for i in range(30):  # cancellations of requests that never asked anything
        repo.cancel("live", f"c{i}", NOW + timedelta(minutes=2))

    swept = repo.sweep(NOW + timedelta(minutes=3))

    assert swept == 250
    assert count(migrated_engine, "legacy_sessions") == 1
    assert count(migrated_engine, "legacy_questions") == 0
