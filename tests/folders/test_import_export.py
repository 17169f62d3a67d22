"""`notes-server import` and `export`: front matter, refusals, idempotency and round trips."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from notes_server.cli.main import main

WS = "file:///home/alice/notes"
Run = Callable[..., Result]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "notes.db"


@pytest.fixture
def run(tmp_path: Path, db: Path) -> Run:
    runner = CliRunner()
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "NOTES_SERVER_DB": f"sqlite:///{db}"}
    assert runner.invoke(main, ["migrate"], env=env).exit_code == 0

    def _run(*args: str) -> Result:
        # In-process: confining would confine pytest itself (the sandbox is tested in
        # test_folder_sandbox.py, in processes of its own).
        return runner.invoke(main, [*args, "--sandbox", "off"], env=env)

    return _run


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    return folder


def import_json(run: Run, folder: Path, *extra: str) -> dict[str, Any]:
    result = run("import", str(folder), "--workspace", WS, "--json", *extra)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id, path, title, body, created_at, updated_at, version FROM notes ORDER BY path"
        ).fetchall()


def test_titles_come_from_front_matter_then_heading_then_file_name(
    run: Run, vault: Path, db: Path
) -> None:
    (vault / "fm.md").write_text("---\ntitle: From front matter\n---\n# Heading\n", "utf-8")
    (vault / "heading.md").write_text("intro\n\n## Second level  \nbody\n", "utf-8")
    (vault / "plain name.txt").write_text("no heading at all\n", "utf-8")

    summary = import_json(run, vault)

    assert summary["imported"] == 3
    assert [(r[1], r[2], r[3]) for r in rows(db)] == [
        ("fm.md", "From front matter", "# Heading\n"),
        ("heading.md", "Second level", "intro\n\n## Second level  \nbody\n"),
        ("plain name.txt", "plain name", "no heading at all\n"),
    ]


def test_timestamps_come_from_front_matter_else_the_file_mtime(
    run: Run, vault: Path, db: Path
) -> None:
    (vault / "dated.md").write_text(
        "---\ncreated: 2024-01-02\nupdated: 2024-03-04T05:06:07+02:00\n---\nx\n", "utf-8"
    )
    (vault / "mtime.md").write_text("y\n", "utf-8")
    os.utime(vault / "mtime.md", (1_700_000_000, 1_700_000_000))

    import_json(run, vault)

    (dated, mtime) = rows(db)
    assert dated[4:6] == ("2024-01-02 00:00:00.000000", "2024-03-04 03:06:07.000000")
    assert mtime[4:6] == ("2023-11-14 22:13:20.000000", "2023-11-14 22:13:20.000000")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("---\ntitle: x\nno colon here\n---\n", "line 3: expected 'key: value'"),
        ("---\ntitle: x\n", "front matter has no closing '---' line"),
        ("---\ntitle: [a, b]\n---\n", "line 2: unsupported YAML value '[a, b]'"),
        ("---\ntitle:\n  - nested\n---\n", "line 3: nested value where none is allowed"),
        ("---\ncreated: yesterday\n---\n", "'created' is not an ISO 8601 date or time"),
        ("---\ntitle: a\ntitle: b\n---\n", "line 3: 'title' given twice"),
        ('---\ntitle: "bad \\q escape"\n---\n', "line 2: unsupported escape '\\q'"),
    ],
)
def test_broken_front_matter_is_refused_with_its_reason(
    run: Run, vault: Path, db: Path, text: str, reason: str
) -> None:
    (vault / "broken.md").write_text(text, "utf-8")

    summary = import_json(run, vault)

    assert summary["imported"] == 0
    (problem,) = summary["problems"]
    assert problem["action"] == "refused"
    assert problem["path"] == "broken.md"
    assert problem["reason"].startswith("front matter refused: ")
    assert reason in problem["reason"]
    assert rows(db) == []


def test_non_utf8_and_huge_files_are_refused_and_the_rest_imported(
    run: Run, vault: Path, db: Path
) -> None:
    (vault / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (vault / "huge.md").write_bytes(b"x" * 1_000_001)
    (vault / "fine.md").write_bytes(b"fine")

    summary = import_json(run, vault)

    assert summary["imported"] == 1
    assert {p["path"]: p["reason"] for p in summary["problems"]} == {
        "huge.md": "larger than 1000000 bytes",
        "latin1.md": "not UTF-8 text (byte 3)",
    }


def test_a_deep_tree_is_cut_at_the_depth_limit(run: Run, vault: Path) -> None:
    deep = vault.joinpath(*[f"d{n}" for n in range(34)])
    deep.mkdir(parents=True)
    (deep / "bottom.md").write_bytes(b"x")
    (vault / "d0" / "shallow.md").write_bytes(b"x")

    summary = import_json(run, vault)

    assert summary["imported"] == 1
    (problem,) = summary["problems"]
    assert problem["reason"] == "deeper than 32 folders"
    assert problem["path"].count("/") == 32


def test_importing_twice_changes_nothing_the_second_time(run: Run, vault: Path, db: Path) -> None:
    (vault / "a.md").write_text("---\ntitle: A\ntags:\n  - x\n---\nbody\n", "utf-8")
    (vault / "sub").mkdir()
    (vault / "sub" / "b.md").write_text("# B\n", "utf-8")
    import_json(run, vault)
    before = rows(db)

    second = import_json(run, vault)

    assert (second["imported"], second["updated"], second["unchanged"]) == (0, 0, 2)
    assert rows(db) == before


def test_a_dry_run_reports_and_changes_nothing(run: Run, vault: Path, db: Path) -> None:
    (vault / "a.md").write_text("a\n", "utf-8")

    result = run("import", str(vault), "--workspace", WS, "--dry-run")

    assert result.exit_code == 0
    assert result.output == "dry run: would have 1 imported\n"
    assert rows(db) == []


def test_on_conflict_skip_overwrite_and_rename(run: Run, vault: Path, db: Path) -> None:
    (vault / "a.md").write_text("first\n", "utf-8")
    import_json(run, vault)
    (vault / "a.md").write_text("second\n", "utf-8")

    skipped = import_json(run, vault)
    renamed = import_json(run, vault, "--on-conflict", "rename")
    renamed_again = import_json(run, vault, "--on-conflict", "rename")

    assert skipped["problems"] == [
        {
            "action": "skipped",
            "path": "a.md",
            "reason": "a different note is already at this path (--on-conflict)",
        }
    ]
    assert (renamed["imported"], renamed_again["unchanged"]) == (1, 1)
    assert [(r[1], r[3]) for r in rows(db)] == [
        ("a (imported).md", "second\n"),
        ("a.md", "first\n"),
    ]

    overwritten = import_json(run, vault, "--on-conflict", "overwrite")

    assert overwritten["updated"] == 1
    assert [(r[1], r[3], r[6]) for r in rows(db)][1] == ("a.md", "second\n", 2)


def test_import_export_import_leaves_the_store_unchanged(
    run: Run, vault: Path, db: Path, tmp_path: Path
) -> None:
    (vault / "a.md").write_text(
        '---\ntitle: "Quotes \\" and \\\\ back"\nalias: kept\ntags:\n  - x\n---\nbody\n', "utf-8"
    )
    (vault / "nested" / "deeper").mkdir(parents=True)
    (vault / "nested" / "deeper" / "n.markdown").write_text("# Título\n\ntext", "utf-8")
    (vault / "no-newline.txt").write_text("ends without a newline", "utf-8")
    import_json(run, vault)
    before = rows(db)
    out = tmp_path / "out"

    exported = run("export", "--workspace", WS, str(out), "--json")
    again = import_json(run, out)

    assert json.loads(exported.output)["exported"] == 3
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 3)
    assert rows(db) == before
    text = (out / "a.md").read_text("utf-8")
    assert text.startswith(f"---\nid: {before[0][0]}\ntitle: ")
    assert "alias: kept\ntags:\n  - x\n---\nbody\n" in text


def test_export_writes_each_file_once_and_leaves_no_temp_files(
    run: Run, vault: Path, tmp_path: Path
) -> None:
    (vault / "a.md").write_text("a\n", "utf-8")
    import_json(run, vault)
    out = tmp_path / "out"

    first = run("export", "--workspace", WS, str(out))
    second = run("export", "--workspace", WS, str(out))

    assert (first.output, second.output) == ("1 exported\n", "1 unchanged\n")
    assert sorted(p.name for p in out.iterdir()) == ["a.md"]


def test_export_refuses_to_write_through_a_symlink(run: Run, vault: Path, tmp_path: Path) -> None:
    (vault / "a.md").write_text("a\n", "utf-8")
    (vault / "sub").mkdir()
    (vault / "sub" / "b.md").write_text("b\n", "utf-8")
    import_json(run, vault)
    out, secret, outside = tmp_path / "out", tmp_path / "secret.md", tmp_path / "elsewhere"
    out.mkdir()
    outside.mkdir()
    secret.write_text("SECRET", "utf-8")
    (out / "a.md").symlink_to(secret)
    (out / "sub").symlink_to(outside)

    result = run("export", "--workspace", WS, str(out), "--json")

    summary = json.loads(result.output)
    assert {p["path"]: p["reason"] for p in summary["problems"]} == {
        "a.md": "a symlink (not followed) is in the way",
        "sub/b.md": "'sub' is not a plain folder (symlink?)",
    }
    assert secret.read_text("utf-8") == "SECRET"
    assert list(outside.iterdir()) == []


def test_a_folder_that_is_a_symlink_or_missing_is_one_line_and_exit_2(
    run: Run, vault: Path, tmp_path: Path
) -> None:
    (tmp_path / "alias").symlink_to(vault)

    linked = run("import", str(tmp_path / "alias"), "--workspace", WS)
    missing = run("import", str(tmp_path / "missing"), "--workspace", WS)
    bad_uri = run("import", str(vault), "--workspace", "file:///a/../b")

    assert (linked.exit_code, missing.exit_code, bad_uri.exit_code) == (2, 2, 2)
    assert linked.output.endswith("alias: is a symlink; name the real directory\n")
    assert missing.output.endswith("missing: no such directory\n")
    assert "not an acceptable workspace URI (dot segment not allowed)" in bad_uri.output


def test_a_byte_order_mark_does_not_hide_the_front_matter(run: Run, vault: Path, db: Path) -> None:
    (vault / "bom.md").write_bytes("\ufeff---\ntitle: With BOM\n---\nbody\n".encode())

    import_json(run, vault)

    assert [(r[2], r[3]) for r in rows(db)] == [("With BOM", "body\n")]


def tag_rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT n.path, t.tag FROM note_tags t JOIN notes n ON n.id = t.note_id "
            "ORDER BY n.path, t.tag_key"
        ).fetchall()


def test_import_reads_tags_and_links_and_export_writes_tags_and_properties_set_later(
    run: Run, vault: Path, db: Path, tmp_path: Path
) -> None:
    from notes_server.markup.properties import with_changes
    from notes_server.store import folders, notes
    from notes_server.store.engine import make_engine, write_tx

    (vault / "a.md").write_text("---\ntags: [Front, shared]\nstatus: draft\n---\n#body\n", "utf-8")
    (vault / "b.md").write_text("links to [[a]] and [a](a.md) #Shared\n", "utf-8")
    import_json(run, vault)
    assert tag_rows(db) == [
        ("a.md", "body"),
        ("a.md", "Front"),
        ("a.md", "shared"),
        ("b.md", "Shared"),
    ]
    with sqlite3.connect(db) as conn:
        targets = conn.execute("SELECT target, target_id IS NOT NULL FROM note_links").fetchall()
    assert sorted(targets) == [("a", 1), ("a.md", 1)]  # [[a]]: the title from the file name

    engine = make_engine(f"sqlite:///{db}")
    try:
        with write_tx(engine) as conn:
            note = notes.get_note_by_path(conn, WS, "a.md")
            assert note is not None
            extra = folders.extras(conn, [note.id])[note.id]
            changed = with_changes(extra, {"tags": ["new"], "due": 3})
            notes.update_fields(conn, note, now=datetime.now(UTC), extra=changed)
    finally:
        engine.dispose()
    out = tmp_path / "out"
    assert run("export", "--workspace", WS, str(out), "--json").exit_code == 0

    text = (out / "a.md").read_text("utf-8")
    assert "tags:\n  - new\nstatus: draft\ndue: 3\n---\n#body\n" in text
    assert tag_rows(db)[:2] == [("a.md", "body"), ("a.md", "new")]


def revisions(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT path, version, body, front_matter, principal, tool FROM note_revisions "
            "ORDER BY path, version"
        ).fetchall()


def test_an_overwriting_import_keeps_the_replaced_version_in_the_history(
    run: Run, vault: Path, db: Path
) -> None:
    (vault / "a.md").write_text("---\nauthor: me\n---\nfirst\n", "utf-8")
    import_json(run, vault)
    (vault / "a.md").write_text("---\nauthor: you\n---\nsecond\n", "utf-8")

    import_json(run, vault, "--on-conflict", "overwrite")

    assert [(r[1], r[3], r[6]) for r in rows(db)] == [("a.md", "second\n", 2)]
    [kept] = revisions(db)
    assert kept[:4] == ("a.md", 1, "first\n", "author: me\n")
    assert kept[5] == "import"
    with sqlite3.connect(db) as conn:
        author = conn.execute("SELECT changed_by, changed_tool FROM notes").fetchone()
    assert author[1] == "import" and author[0] == kept[4]
