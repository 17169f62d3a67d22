"""`notes-server audit`: lists committed deletes, archives and declined confirmations, newest
first, filtered by workspace and principal; a malformed workspace is a usage error."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from notes_server.cli.main import main
from notes_server.store import audit
from notes_server.store.audit import AuditRecord
from tests.helpers import subprocess_env

WS = "file:///home/alice/notes"
OTHER = "file:///home/bob/work"
RUN_TIMEOUT_S = 60  # a safety net against a hung child, not a timing assertion

DELETED = AuditRecord(
    at=datetime(2026, 8, 1, 9, 0, 0, tzinfo=UTC),
    principal="alice",
    tool="notes_delete",
    outcome="deleted",
    workspace=WS,
    note_id="note_aaaa",
    note_title="TPS report",
    note_path="a.md",
    nonce="1" * 32,
)
DECLINED = AuditRecord(
    at=datetime(2026, 8, 1, 11, 0, 0, tzinfo=UTC),
    principal="alice",
    tool="notes_delete",
    outcome="declined",
    workspace=WS,
    note_id=None,
    note_title="tps report",
    note_path=None,
    nonce="2" * 32,
)
ARCHIVED = AuditRecord(
    at=datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC),
    principal="bob",
    tool="notes_archive",
    outcome="archived",
    workspace=OTHER,
    note_id="note_cccc",
    note_title="Plans",
    note_path="plans.md",
    nonce="3" * 32,
)

LINE_DELETED = (
    f"2026-08-01T09:00:00Z\talice\tnotes_delete\tdeleted\tnote_aaaa 'TPS report'\t{WS}\ta.md"
)
LINE_DECLINED = f"2026-08-01T11:00:00Z\talice\tnotes_delete\tdeclined\t(title 'tps report')\t{WS}"
LINE_ARCHIVED = (
    f"2026-08-01T10:00:00Z\tbob\tnotes_archive\tarchived\tnote_cccc 'Plans'\t{OTHER}\tplans.md"
)


def make_db(tmp_path: Path, *rows: AuditRecord) -> str:
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine, write_tx

    url = f"sqlite:///{tmp_path}/notes.db"
    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            for row in rows:
                audit.record(conn, row)
    finally:
        engine.dispose()
    return url


def invoke(*argv: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["audit", *argv])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def url(tmp_path: Path) -> str:
    """Rows inserted out of time order, so the listing must sort them itself."""
    return make_db(tmp_path, DELETED, DECLINED, ARCHIVED)


def test_audit_lists_every_row_newest_first(tmp_path: Path, url: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "notes_server", "audit", "--db", url],
        capture_output=True,
        text=True,
        env=subprocess_env(tmp_path),
        cwd=tmp_path,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [LINE_DECLINED, LINE_ARCHIVED, LINE_DELETED]


@pytest.mark.parametrize(
    ("filters", "lines"),
    [
        (("--workspace", WS), [LINE_DECLINED, LINE_DELETED]),
        (("--workspace", "FILE:///home/alice/%6Eotes"), [LINE_DECLINED, LINE_DELETED]),
        (("--workspace", "file:///home/alice"), []),
        (("--principal", "bob"), [LINE_ARCHIVED]),
        (("--limit", "2"), [LINE_DECLINED, LINE_ARCHIVED]),
        (("--workspace", WS, "--principal", "alice", "--limit", "1"), [LINE_DECLINED]),
        (("--workspace", OTHER, "--principal", "alice"), []),
    ],
    ids=[
        "workspace",
        "workspace-other-spelling",
        "parent-workspace",
        "principal",
        "limit",
        "all-filters",
        "no-match",
    ],
)
def test_audit_filters_by_workspace_principal_and_limit(
    url: str, filters: tuple[str, ...], lines: list[str]
) -> None:
    code, out, _ = invoke("--db", url, *filters)

    assert code == 0
    assert out.splitlines() == (lines or ["no audited actions"])


def test_audit_of_an_empty_log_says_so(tmp_path: Path) -> None:
    code, out, _ = invoke("--db", make_db(tmp_path))

    assert (code, out) == (0, "no audited actions\n")


@pytest.mark.parametrize(
    ("workspace", "reason"),
    [
        ("notes", "scheme must be file"),
        ("http://example.com/notes", "scheme must be file"),
        ("file:///home/alice/../bob", "dot segment not allowed"),
        ("file://host/notes", "host not allowed; use file:///"),
    ],
)
def test_audit_refuses_a_malformed_workspace_as_a_usage_error(
    url: str, workspace: str, reason: str
) -> None:
    code, out, err = invoke("--db", url, "--workspace", workspace)

    assert code == 2
    assert out == ""
    assert err.endswith(f"\nError: Invalid value for --workspace: {reason}\n")


def test_audit_refuses_a_malformed_workspace_with_exit_status_2(tmp_path: Path, url: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "notes_server", "audit", "--db", url, "--workspace", "notes"],
        capture_output=True,
        text=True,
        env=subprocess_env(tmp_path),
        cwd=tmp_path,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )

    assert run.returncode == 2
    assert run.stderr.startswith("Usage: notes-server audit [OPTIONS]\n")
    assert run.stderr.endswith("\nError: Invalid value for --workspace: scheme must be file\n")
    assert run.stdout == ""


@pytest.mark.parametrize("limit", ["0", "-1", "many"])
def test_audit_refuses_a_limit_that_is_not_a_positive_integer(url: str, limit: str) -> None:
    code, _, err = invoke("--db", url, "--limit", limit)

    assert code == 2
    assert "Error: Invalid value for '--limit'" in err
