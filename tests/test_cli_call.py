"""`notes-server call` end to end: a real `call` process that spawns a real `serve` process,
answers the confirmation form from `--answer`/`--action` (or a terminal), and prints the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from notes_server.security.uri import canonical_workspace
from notes_server.store import grants, notes
from notes_server.store.models import audit_table, nonces_table, notes_table
from notes_server.store.notes import NoteRecord
from tests.helpers import subprocess_env

WS = "file:///home/alice/notes"
TITLE = "TPS report"
OLDER = datetime(2026, 8, 1, 9, 0, 0, tzinfo=UTC)
NEWER = datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC)
RUN_TIMEOUT_S = 60  # a safety net against a hung child, not a timing assertion


def prepare(url: str, *specs: tuple[str, str, datetime]) -> list[NoteRecord]:
    """Migrate the database, grant alice WS and add notes (title, path, updated_at)."""
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine, write_tx

    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            grants.upsert(conn, "alice", canonical_workspace(WS), "write", OLDER)
            return [
                notes.insert_note(conn, workspace=WS, path=path, title=title, body="", now=at)
                for title, path, at in specs
            ]
    finally:
        engine.dispose()


def counts(url: str) -> tuple[int, int, int]:
    """(notes, consumed nonces, audit rows)."""
    from notes_server.store.engine import make_engine, read_tx

    engine = make_engine(url)
    try:
        with read_tx(engine) as conn:
            return tuple(  # type: ignore[return-value]
                int(conn.execute(select(func.count()).select_from(model)).scalar_one())
                for model in (notes_table, nonces_table, audit_table)
            )
    finally:
        engine.dispose()


def note_ids(url: str) -> set[str]:
    from notes_server.store.engine import make_engine, read_tx

    engine = make_engine(url)
    try:
        with read_tx(engine) as conn:
            return set(conn.execute(select(notes_table.c.id)).scalars())
    finally:
        engine.dispose()


def audit_outcomes(url: str) -> list[tuple[str, str, str | None]]:
    from notes_server.store import audit
    from notes_server.store.engine import make_engine, read_tx

    engine = make_engine(url)
    try:
        with read_tx(engine) as conn:
            return [(r.tool, r.outcome, r.note_id) for r in audit.recent(conn)]
    finally:
        engine.dispose()


def run_call(
    tmp_path: Path,
    *argv: str,
    env: Mapping[str, str] | None = None,
    stdin: Any = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notes_server", "call", *argv],
        stdin=stdin,
        capture_output=True,
        text=True,
        env=subprocess_env(tmp_path, env),
        cwd=tmp_path,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def delete_args(url: str, *extra: str, principal: str = "alice") -> Sequence[str]:
    return (
        "notes_delete",
        "--db",
        url,
        "--principal",
        principal,
        "--arg",
        f"workspaceUri={WS}",
        "--arg",
        f"title={TITLE}",
        *extra,
    )


def deleted(note: NoteRecord) -> dict[str, Any]:
    return {
        "deleted": True,
        "outcome": "deleted",
        "noteId": note.id,
        "title": note.title,
        "uri": f"{WS}/{note.path}",
    }


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/notes.db"


def test_call_with_scripted_answers_deletes_the_chosen_note(tmp_path: Path, url: str) -> None:
    older, newer = prepare(url, (TITLE, "a.md", OLDER), (TITLE, "b.md", NEWER))

    run = run_call(tmp_path, *delete_args(url, "--answer", "note_id=1", "--answer", "confirm=y"))

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == deleted(newer)
    assert f"2 notes match 'TPS report' in {WS}." in run.stderr
    assert counts(url) == (1, 1, 1)
    assert note_ids(url) == {older.id}
    assert audit_outcomes(url) == [("notes_delete", "deleted", newer.id)]


def test_call_uses_the_default_database_and_the_principal_from_the_environment(
    tmp_path: Path,
) -> None:
    default_db = tmp_path / "xdg" / "notes-server" / "notes.db"
    default_db.parent.mkdir(parents=True)
    url = f"sqlite:///{default_db}"
    [note] = prepare(url, ("Plans", "plans.md", OLDER))

    run = run_call(
        tmp_path,
        "notes_archive",
        "--json",
        json.dumps({"workspaceUri": WS, "title": "plans"}),
        "--answer",
        f"note_id={note.id}",
        "--answer",
        "confirm=yes",
        env={"NOTES_SERVER_PRINCIPAL": "alice"},
    )

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "archived": True,
        "outcome": "archived",
        "noteId": note.id,
        "title": "Plans",
        "uri": f"{WS}/plans.md",
    }
    assert audit_outcomes(url) == [("notes_archive", "archived", note.id)]


def test_call_with_action_decline_consumes_the_confirmation_and_keeps_the_note(
    tmp_path: Path, url: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, "--action", "decline"))

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"deleted": False, "outcome": "declined"}
    assert counts(url) == (1, 1, 1)
    assert audit_outcomes(url) == [("notes_delete", "declined", None)]


def test_call_with_action_cancel_touches_nothing(tmp_path: Path, url: str) -> None:
    prepare(url, (TITLE, "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, "--action", "cancel"))

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"deleted": False, "outcome": "cancelled"}
    assert counts(url) == (1, 0, 0)


@pytest.mark.parametrize(
    ("answers", "missing"),
    [((), "note_id"), (("--answer", "note_id=1"), "confirm")],
    ids=["no-answers", "no-confirm"],
)
def test_call_without_an_answer_and_without_a_terminal_names_the_missing_field(
    tmp_path: Path, url: str, answers: tuple[str, ...], missing: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, *answers))

    assert run.returncode == 1
    assert f"Error: no answer for '{missing}': pass --answer {missing}=VALUE" in run.stderr
    assert run.stdout == ""
    assert counts(url) == (1, 0, 0)


@pytest.mark.parametrize(
    ("principal", "answers", "message"),
    [
        (
            "bob",
            ("--answer", "note_id=1", "--answer", "confirm=y"),
            "Workspace is not available to this principal",
        ),
    ],
    ids=["not-authorized"],
)
def test_call_exits_non_zero_with_the_json_rpc_error_code(
    tmp_path: Path, url: str, principal: str, answers: tuple[str, ...], message: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, *answers, principal=principal))

    assert run.returncode == 1
    assert f"Error: error -32602: {message}" in run.stderr
    assert run.stdout == ""
    assert counts(url) == (1, 0, 0)


def test_call_answering_no_to_the_confirmation_declines_and_keeps_the_note(
    tmp_path: Path, url: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, "--answer", "note_id=1", "--answer", "confirm=n"))

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"deleted": False, "outcome": "declined"}
    assert counts(url) == (1, 1, 1)
    assert audit_outcomes(url) == [("notes_delete", "declined", None)]


def test_call_prints_a_tool_error_and_exits_non_zero(tmp_path: Path, url: str) -> None:
    prepare(url, ("Something else", "a.md", OLDER))

    run = run_call(tmp_path, *delete_args(url, "--answer", "note_id=1", "--answer", "confirm=y"))

    assert run.returncode == 1
    assert run.stdout == (
        "No matching note in this workspace: no note title contains 'TPS report', so there "
        "is nothing to delete. Use notes_search to find the note's title.\n"
    )
    assert counts(url) == (1, 0, 0)


def test_call_refuses_a_choice_that_is_not_offered_before_sending_it(
    tmp_path: Path, url: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER), (TITLE, "b.md", NEWER))

    run = run_call(tmp_path, *delete_args(url, "--answer", "note_id=3", "--answer", "confirm=y"))

    assert run.returncode == 1
    assert "Error: note_id: choose 1-2 or one of the listed values" in run.stderr
    assert counts(url) == (2, 0, 0)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_call_asks_in_the_terminal_when_nothing_is_scripted(tmp_path: Path, url: str) -> None:
    older, newer = prepare(url, (TITLE, "a.md", OLDER), (TITLE, "b.md", NEWER))
    leader, follower = os.openpty()
    try:
        # Typed ahead: the terminal queues one line per prompt (note, then confirm).
        os.write(leader, b"2\ny\n")
        run = run_call(tmp_path, *delete_args(url), stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == deleted(older)
    assert "accept, decline or cancel" not in run.stderr
    assert f"  1. TPS report \u2014 b.md (updated {NEWER:%Y-%m-%dT%H:%M:%S}Z)" in run.stderr
    assert f"  2. TPS report \u2014 a.md (updated {OLDER:%Y-%m-%dT%H:%M:%S}Z)" in run.stderr
    assert "Yes, permanently delete this note [y/n]" in run.stderr
    assert counts(url) == (1, 1, 1)
    assert note_ids(url) == {newer.id}


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_call_in_the_terminal_asks_for_the_note_then_yes_no_and_no_declines(
    tmp_path: Path, url: str
) -> None:
    prepare(url, (TITLE, "a.md", OLDER), (TITLE, "b.md", NEWER))
    leader, follower = os.openpty()
    try:
        os.write(leader, b"1\nn\n")
        run = run_call(tmp_path, *delete_args(url), stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"deleted": False, "outcome": "declined"}
    note_prompt = run.stderr.index("Note:")
    assert run.stderr.index("  1. TPS report") < note_prompt
    assert note_prompt < run.stderr.index("Yes, permanently delete this note [y/n]")
    assert counts(url) == (2, 1, 1)
    assert audit_outcomes(url) == [("notes_delete", "declined", None)]


def test_the_terminal_form_asks_yes_no_questions_after_the_choice_whatever_the_order() -> None:
    from notes_server.cli.client.forms import fill_form

    schema = {
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean", "title": "Yes, delete it"},
            "note_id": {"type": "string", "title": "Note", "oneOf": [{"const": "n1"}]},
        },
        "required": ["confirm", "note_id"],
    }
    asked: list[str] = []
    replies = iter(["1", "y"])

    def prompt(text: str) -> str:
        asked.append(text)
        return next(replies)

    content = fill_form(schema, {}, prompt, lambda line: None)

    assert asked == ["Note", "Yes, delete it [y/n]"]
    assert content == {"note_id": "n1", "confirm": True}


def test_call_runs_the_link_and_tag_tools(tmp_path: Path, url: str) -> None:
    from notes_server.store.engine import make_engine, write_tx

    (target,) = prepare(url, ("Plan", "plan.md", OLDER))
    engine = make_engine(url)
    try:
        with write_tx(engine) as conn:
            notes.insert_note(
                conn, workspace=WS, path="s.md", title="S", body="[[plan]] #Q3", now=NEWER
            )
    finally:
        engine.dispose()
    common = ("--db", url, "--principal", "alice", "--arg", f"workspaceUri={WS}")

    links = run_call(tmp_path, "notes_links", *common, "--arg", f"noteId={target.id}")
    tags = run_call(tmp_path, "notes_tags", *common, "--arg", "prefix=q")

    assert links.returncode == 0, links.stderr
    assert json.loads(links.stdout)["counts"] == {"outgoing": 0, "unresolved": 0, "incoming": 1}
    assert tags.returncode == 0, tags.stderr
    assert json.loads(tags.stdout) == {"tags": [{"tag": "Q3", "notes": 1}], "total": 1}


def test_call_runs_the_history_tools(tmp_path: Path, url: str) -> None:
    [note] = prepare(url, (TITLE, "a.md", OLDER))
    base = {"workspaceUri": WS, "noteId": note.id}
    edit = {"oldText": "", "newText": "x"}  # refused by the schema: -32602, exit status 1

    refused = run_call(
        tmp_path,
        "notes_edit",
        "--db",
        url,
        "--principal",
        "alice",
        "--json",
        json.dumps({**base, "edits": [edit]}),
    )
    edited = run_call(
        tmp_path,
        "notes_update",
        "--db",
        url,
        "--principal",
        "alice",
        "--json",
        json.dumps({**base, "body": "# Plan\nfirst\n"}),
    )
    appended = run_call(
        tmp_path,
        "notes_edit",
        "--db",
        url,
        "--principal",
        "alice",
        "--json",
        json.dumps({**base, "edits": [{"section": "Plan", "action": "append", "text": "second"}]}),
    )
    listed = run_call(
        tmp_path,
        "notes_history",
        "--db",
        url,
        "--principal",
        "alice",
        "--arg",
        f"workspaceUri={WS}",
        "--arg",
        f"noteId={note.id}",
    )
    reverted = run_call(
        tmp_path,
        "notes_revert",
        "--db",
        url,
        "--principal",
        "alice",
        "--arg",
        f"workspaceUri={WS}",
        "--arg",
        f"noteId={note.id}",
        "--arg",
        "version=2",
    )

    assert refused.returncode != 0
    assert "-32602" in refused.stderr
    assert "oldText" in refused.stderr
    assert edited.returncode == 0, edited.stderr
    assert appended.returncode == 0, appended.stderr
    assert json.loads(appended.stdout)["diff"].endswith(" first\n+second\n")
    assert listed.returncode == 0, listed.stderr
    assert [v["version"] for v in json.loads(listed.stdout)["versions"]] == [3, 2, 1]
    assert reverted.returncode == 0, reverted.stderr
    assert json.loads(reverted.stdout)["note"]["body"] == "# Plan\nfirst\n"
