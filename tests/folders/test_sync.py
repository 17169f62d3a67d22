"""`notes-server sync`: two-way, per-note state, conflicts keep both, deletions only when the
other side is unchanged, renames detected by content. Each sync is a fresh process-like CLI
run, so every case is also "changed while sync was not running"."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from notes_server.cli.main import main
from notes_server.store import folders
from notes_server.store.engine import make_engine, write_tx
from notes_server.tools.services import utc_now

WS = "file:///home/alice/notes"
Sync = Callable[[], dict[str, Any]]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "notes.db"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return tmp_path / "vault"


@pytest.fixture
def sync(tmp_path: Path, db: Path, vault: Path) -> Sync:
    runner = CliRunner()
    env = {
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "NOTES_SERVER_DB": f"sqlite:///{db}",
        "NOTES_SERVER_PRINCIPAL": "carol",  # who the audit log names
    }
    assert runner.invoke(main, ["migrate"], env=env).exit_code == 0

    def _sync() -> dict[str, Any]:
        result = runner.invoke(
            main, ["sync", "--workspace", WS, str(vault), "--json", "--sandbox", "off"], env=env
        )
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.output))

    return _sync


@pytest.fixture
def store(db: Path) -> Iterator[Callable[..., None]]:
    """store(path, body=..., delete=False): change a note the way a tool would."""
    engine = make_engine(f"sqlite:///{db}")

    def _change(path: str, body: str | None = None, *, delete: bool = False) -> None:
        with write_tx(engine) as conn:
            note = folders.notes_by_path(conn, WS)[path]
            if delete:
                assert folders.delete_if_version(conn, note)
            else:
                assert body is not None
                assert folders.replace_content(
                    conn, note, title=note.title, body=body, updated=utc_now()
                )

    yield _change
    engine.dispose()


def notes(db: Path) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT path, id, body FROM notes").fetchall()
    return {path: (note_id, body) for path, note_id, body in rows}


def body_of(file: Path) -> str:
    return file.read_text("utf-8").split("---\n", 2)[2]


@pytest.fixture
def synced(sync: Sync, vault: Path) -> Sync:
    """A vault with a.md and sub/b.md, synced once."""
    (vault / "sub").mkdir(parents=True)
    (vault / "a.md").write_text("alpha\n", "utf-8")
    (vault / "sub" / "b.md").write_text("beta\n", "utf-8")
    first = sync()
    assert first["imported"] == 2
    return sync


def test_a_second_sync_with_no_changes_does_nothing(synced: Sync, db: Path) -> None:
    before = notes(db)

    again = synced()

    assert (again["unchanged"], again["imported"], again["exported"], again["updated"]) == (
        2,
        0,
        0,
        0,
    )
    assert notes(db) == before


def test_an_edit_in_the_folder_reaches_the_store(synced: Sync, vault: Path, db: Path) -> None:
    (vault / "a.md").write_text("alpha, edited in vim\n", "utf-8")

    summary = synced()

    assert summary["updated"] == 1
    assert notes(db)["a.md"][1] == "alpha, edited in vim\n"
    assert synced()["updated"] == 0


def test_an_edit_in_the_store_reaches_the_folder(
    synced: Sync, vault: Path, store: Callable[..., None]
) -> None:
    store("sub/b.md", "beta, edited by a tool\n")

    summary = synced()

    assert summary["exported"] == 1
    assert body_of(vault / "sub" / "b.md") == "beta, edited by a tool\n"
    assert synced()["exported"] == 0


def test_edits_on_both_sides_keep_both(
    synced: Sync, vault: Path, db: Path, store: Callable[..., None]
) -> None:
    store("a.md", "store version\n")
    (vault / "a.md").write_text("file version\n", "utf-8")

    summary = synced()

    assert summary["conflicts"] == [{"path": "a.md", "keptAs": "a (conflict).md"}]
    assert notes(db)["a.md"][1] == "store version\n"
    assert notes(db)["a (conflict).md"][1] == "file version\n"
    assert body_of(vault / "a.md") == "store version\n"
    assert body_of(vault / "a (conflict).md") == "file version\n"
    assert synced()["conflicts"] == []


def test_a_file_deleted_while_the_note_is_unchanged_deletes_the_note(
    synced: Sync, vault: Path, db: Path
) -> None:
    (vault / "a.md").unlink()

    summary = synced()

    assert summary["deleted"] == 1
    assert set(notes(db)) == {"sub/b.md"}


def test_a_file_deleted_while_the_note_was_edited_keeps_the_note(
    synced: Sync, vault: Path, db: Path, store: Callable[..., None]
) -> None:
    (vault / "a.md").unlink()
    store("a.md", "edited meanwhile\n")

    summary = synced()

    assert summary["deleted"] == 0
    assert notes(db)["a.md"][1] == "edited meanwhile\n"
    assert body_of(vault / "a.md") == "edited meanwhile\n"


def test_a_note_deleted_while_the_file_is_unchanged_deletes_the_file(
    synced: Sync, vault: Path, store: Callable[..., None]
) -> None:
    store("a.md", delete=True)

    summary = synced()

    assert summary["deleted"] == 1
    assert not (vault / "a.md").exists()


def test_a_note_deleted_while_the_file_was_edited_keeps_the_file(
    synced: Sync, vault: Path, db: Path, store: Callable[..., None]
) -> None:
    store("a.md", delete=True)
    (vault / "a.md").write_text("edited meanwhile\n", "utf-8")

    summary = synced()

    assert summary["deleted"] == 0
    assert notes(db)["a.md"][1] == "edited meanwhile\n"
    assert (vault / "a.md").read_text("utf-8") == "edited meanwhile\n"


def test_a_renamed_file_moves_the_same_note(synced: Sync, vault: Path, db: Path) -> None:
    note_id = notes(db)["a.md"][0]
    (vault / "a.md").rename(vault / "sub" / "renamed.md")

    summary = synced()

    assert (summary["imported"], summary["deleted"], summary["updated"]) == (0, 0, 1)
    assert notes(db)["sub/renamed.md"][0] == note_id
    assert "a.md" not in notes(db)


def test_new_files_and_new_notes_cross_over(
    synced: Sync, vault: Path, db: Path, tmp_path: Path
) -> None:
    (vault / "new.md").write_text("# New file\n", "utf-8")
    runner = CliRunner()
    env = {"NOTES_SERVER_DB": f"sqlite:///{db}", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    other = tmp_path / "other"
    other.mkdir()
    (other / "from-import.md").write_text("imported elsewhere\n", "utf-8")
    assert (
        runner.invoke(
            main, ["import", str(other), "--workspace", WS, "--sandbox", "off"], env=env
        ).exit_code
        == 0
    )

    summary = synced()

    assert (summary["imported"], summary["exported"]) == (1, 1)
    assert "new.md" in notes(db)
    assert body_of(vault / "from-import.md") == "imported elsewhere\n"


def test_a_refused_file_is_never_taken_for_a_deleted_one(
    synced: Sync, vault: Path, db: Path, tmp_path: Path
) -> None:
    (vault / "a.md").unlink()
    (tmp_path / "elsewhere.md").write_text("x", "utf-8")
    (vault / "a.md").symlink_to(tmp_path / "elsewhere.md")

    summary = synced()

    assert summary["deleted"] == 0
    assert "a.md" in notes(db)
    assert summary["problems"] == [
        {"action": "refused", "path": "a.md", "reason": "symlink (not followed)"}
    ]


def audit_lines(tmp_path: Path, db: Path) -> list[list[str]]:
    """`notes-server audit` for the workspace, oldest first, each line split into columns
    without its timestamp."""
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "NOTES_SERVER_DB": f"sqlite:///{db}"}
    result = CliRunner().invoke(main, ["audit", "--workspace", WS], env=env)
    assert result.exit_code == 0, result.output
    if result.output == "no audited actions\n":
        return []
    return [line.split("\t")[1:] for line in reversed(result.output.splitlines())]


def test_every_deletion_sync_propagates_is_audited_with_actor_note_and_path(
    synced: Sync, vault: Path, db: Path, tmp_path: Path, store: Callable[..., None]
) -> None:
    ids = {path: note_id for path, (note_id, _body) in notes(db).items()}
    assert audit_lines(tmp_path, db) == []
    (vault / "a.md").unlink()
    synced()
    store("sub/b.md", delete=True)
    synced()

    assert audit_lines(tmp_path, db) == [
        ["carol", "sync", "deleted", f"{ids['a.md']} 'a'", WS, "a.md"],
        ["carol", "sync", "file removed", f"{ids['sub/b.md']} 'b'", WS, "sub/b.md"],
    ]


def test_conflicts_and_kept_survivors_are_audited(
    synced: Sync, vault: Path, db: Path, tmp_path: Path, store: Callable[..., None]
) -> None:
    ids = {path: note_id for path, (note_id, _body) in notes(db).items()}
    store("a.md", "store version\n")
    (vault / "a.md").write_text("file version\n", "utf-8")
    (vault / "sub" / "b.md").unlink()
    store("sub/b.md", "edited in the store meanwhile\n")
    synced()
    copy = notes(db)["a (conflict).md"][0]
    store("a.md", delete=True)
    (vault / "a.md").write_text("edited in the folder meanwhile\n", "utf-8")
    synced()
    survivor = notes(db)["a.md"][0]

    assert sorted(audit_lines(tmp_path, db)) == [
        ["carol", "sync", "conflict kept", f"{copy} 'a'", WS, "a (conflict).md"],
        ["carol", "sync", "file kept", f"{survivor} 'a'", WS, "a.md"],
        ["carol", "sync", "note kept", f"{ids['sub/b.md']} 'b'", WS, "sub/b.md"],
    ]


def test_a_conflict_copy_never_takes_a_name_already_in_use(
    synced: Sync, vault: Path, db: Path, store: Callable[..., None]
) -> None:
    (vault / "a (conflict).md").write_text("a file of that name already\n", "utf-8")
    store("a.md", "store version\n")
    (vault / "a.md").write_text("file version\n", "utf-8")

    summary = synced()

    assert summary["conflicts"] == [{"path": "a.md", "keptAs": "a (conflict 2).md"}]
    assert notes(db)["a (conflict).md"][1] == "a file of that name already\n"
    assert notes(db)["a (conflict 2).md"][1] == "file version\n"
    assert (vault / "a (conflict).md").read_text("utf-8") == "a file of that name already\n"
    assert body_of(vault / "a (conflict 2).md") == "file version\n"


def test_the_summary_for_a_person_lists_each_refusal_and_conflict(
    synced: Sync, vault: Path, db: Path, tmp_path: Path, store: Callable[..., None]
) -> None:
    store("a.md", "store version\n")
    (vault / "a.md").write_text("file version\n", "utf-8")
    (tmp_path / "elsewhere.md").write_text("not in the vault\n", "utf-8")
    (vault / "link.md").symlink_to(tmp_path / "elsewhere.md")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "NOTES_SERVER_DB": f"sqlite:///{db}"}

    result = CliRunner().invoke(
        main, ["sync", "--workspace", WS, str(vault), "--sandbox", "off"], env=env
    )

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "1 unchanged, 2 exported, 1 refused",
        "refused: link.md: symlink (not followed)",
        "conflict: a.md: both sides changed; kept a (conflict).md",
    ]


def revisions(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT path, version, body, principal, tool FROM note_revisions ORDER BY version"
        ).fetchall()


def test_a_sync_that_changes_a_note_keeps_the_replaced_version(
    synced: Sync, vault: Path, db: Path
) -> None:
    (vault / "a.md").write_text("alpha, edited\n", "utf-8")
    synced()
    (vault / "a.md").rename(vault / "moved.md")
    synced()

    assert revisions(db) == [
        ("a.md", 1, "alpha\n", "carol", "sync"),
        ("a.md", 2, "alpha, edited\n", "carol", "sync"),
    ]
    assert notes(db)["moved.md"][1] == "alpha, edited\n"


def test_a_sync_that_deletes_a_note_removes_its_history(
    synced: Sync, vault: Path, db: Path
) -> None:
    (vault / "a.md").write_text("alpha, edited\n", "utf-8")
    synced()
    (vault / "a.md").unlink()

    assert synced()["deleted"] == 1

    assert revisions(db) == []


def test_a_sync_indexes_the_links_tags_and_properties_of_what_it_brings_in(
    sync: Sync, vault: Path, db: Path
) -> None:
    (vault / "sub").mkdir(parents=True)
    (vault / "sub" / "b.md").write_text("beta\n", "utf-8")
    (vault / "a.md").write_text(
        "---\ntags: [fm]\nstatus: draft\n---\nsee [b](sub/b.md) #alpha\n", "utf-8"
    )

    def index() -> tuple[list[tuple[str, str | None]], list[str], str]:
        with sqlite3.connect(db) as conn:
            a_id = notes(db)["a.md"][0]
            links = conn.execute(
                "SELECT target, target_id FROM note_links WHERE note_id = ? ORDER BY position",
                (a_id,),
            ).fetchall()
            tags = [
                r[0] for r in conn.execute("SELECT tag FROM note_tags WHERE note_id = ?", (a_id,))
            ]
            (extra,) = conn.execute(
                "SELECT extra FROM note_front_matter WHERE note_id = ?", (a_id,)
            ).fetchone()
        return links, sorted(tags), str(extra)

    assert sync()["imported"] == 2
    links, tags, extra = index()
    assert (links, tags) == ([("sub/b.md", notes(db)["sub/b.md"][0])], ["alpha", "fm"])
    assert "status: draft" in extra

    (vault / "a.md").write_text("---\ntags: [other]\n---\nno link now #beta\n", "utf-8")
    assert sync()["updated"] == 1
    links, tags, _ = index()
    assert (links, tags) == ([], ["beta", "other"])
