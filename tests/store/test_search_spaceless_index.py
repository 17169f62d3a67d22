"""The trigram index covers a note's spaceless-script runs only (migration 0020): substrings
of CJK and Thai text are still found after every kind of write, a note without such text
indexes nothing, and no trigram is found across two runs. Both backends (NOTES_SERVER_TEST_DB)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, select

from notes_server.store import notes, search
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import notes_table

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
OTHER = "file:///home/alice/other"


def _create(engine: Engine, title: str, body: str, workspace: str = MINE) -> notes.NoteRecord:
    with write_tx(engine) as conn:
        return notes.insert_note(
            conn,
            workspace=workspace,
            path=f"n/{notes.new_note_id()}.md",
            title=title,
            body=body,
            now=NOW,
        )


def _update(engine: Engine, note: notes.NoteRecord, **fields: object) -> notes.NoteRecord:
    with write_tx(engine) as conn:
        updated = notes.update_fields(conn, note, now=NOW, **fields)
    assert updated is not None
    return updated


def _ids(engine: Engine, query: str, workspace: str = MINE) -> list[str]:
    with read_tx(engine) as conn:
        hits = search.search(conn, workspace, query, include_archived=False, limit=50, offset=0)
    return [h.note.id for h in hits]


def _runs(engine: Engine, note_id: str) -> str:
    with read_tx(engine) as conn:
        stored = conn.execute(
            select(notes_table.c.body_spaceless).where(notes_table.c.id == note_id)
        ).scalar_one()
    return str(stored)


def test_a_note_without_spaceless_text_indexes_an_empty_value(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Plan", "The hiring plan. " * 200)
    assert _runs(migrated_engine, note.id) == ""


def test_the_indexed_value_is_the_runs_one_a_line(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Trip", "Go to 東京都 then, by train, 大阪市 and ภาษาไทย.")
    assert _runs(migrated_engine, note.id) == "東京都\n大阪市\nภาษาไทย"


def test_no_substring_is_found_across_two_runs(migrated_engine: Engine) -> None:
    _create(migrated_engine, "Trip", "東京 and 大阪")
    assert _ids(migrated_engine, "京大阪") == []


def test_a_cjk_substring_is_found_in_a_new_note(migrated_engine: Engine) -> None:
    note = _create(
        migrated_engine, "Trip", "English first. 会議の議事録を書きました。 More English."
    )
    assert _ids(migrated_engine, "議事録") == [note.id]


def test_an_updated_body_is_found_by_its_new_text_and_not_its_old(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Trip", "会議の議事録")
    _update(migrated_engine, note, body="English only now, then 東京都庁へ行く")
    assert (_ids(migrated_engine, "議事録"), _ids(migrated_engine, "都庁へ")) == ([], [note.id])


def test_a_title_only_change_keeps_the_body_substrings_found(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Trip", "会議の議事録")
    _update(migrated_engine, note, title="Meeting")
    assert _ids(migrated_engine, "議事録") == [note.id]


def test_a_moved_note_is_found_in_its_new_workspace_only(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Trip", "会議の議事録")
    _update(migrated_engine, note, workspace=OTHER, path="moved.md")
    assert (_ids(migrated_engine, "議事録"), _ids(migrated_engine, "議事録", OTHER)) == (
        [],
        [note.id],
    )


def test_a_thai_substring_in_the_title_is_still_found(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "ภาษาไทย notes", "English body")
    assert _ids(migrated_engine, "าษา") == [note.id]


def test_a_deleted_note_is_no_longer_found(migrated_engine: Engine) -> None:
    note = _create(migrated_engine, "Trip", "会議の議事録")
    with write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, note)
    assert _ids(migrated_engine, "議事録") == []
