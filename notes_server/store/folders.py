"""Folder mirror persistence: notes written with the file's own timestamps, kept front matter,
and the per-note state two-way sync compares against. Callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from notes_server.store import content_index, history
from notes_server.store.engine import DriverRead, uses_driver
from notes_server.store.models import folder_sync_table as sync_state
from notes_server.store.models import front_matter_table as front
from notes_server.store.models import mirrors_table as mirrors
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import (
    COLUMNS,
    Author,
    NoteRecord,
    forget_front_matter,
    insert_row,
    set_front_matter,
    update_fields,
)


def live_notes(conn: Connection, workspace: str) -> list[NoteRecord]:
    """Every live (not archived) note of a workspace, by path."""
    rows = conn.execute(
        select(*COLUMNS)
        .where(notes.c.workspace == workspace, notes.c.archived.is_(False))
        .order_by(notes.c.path)
    )
    return [NoteRecord.from_row(row) for row in rows]


def notes_by_path(conn: Connection, workspace: str) -> dict[str, NoteRecord]:
    """Every note of a workspace (archived too: their paths are taken) keyed by path."""
    rows = conn.execute(select(*COLUMNS).where(notes.c.workspace == workspace))
    return {row[2]: NoteRecord.from_row(row) for row in rows}


def notes_at(conn: Connection, workspace: str, paths: Sequence[str]) -> dict[str, NoteRecord]:
    """The notes (archived too) at any of ``paths``, keyed by path."""
    found: dict[str, NoteRecord] = {}
    wanted = list(paths)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = conn.execute(
            select(*COLUMNS).where(notes.c.workspace == workspace, notes.c.path.in_(chunk))
        )
        found.update((row[2], NoteRecord.from_row(row)) for row in rows)
    return found


def insert_imported(
    conn: Connection,
    *,
    workspace: str,
    path: str,
    title: str,
    body: str,
    created: datetime,
    updated: datetime,
    extra: str,
    author: Author | None = None,
) -> NoteRecord:
    """A new note with the file's timestamps and its kept front matter, in one place so that
    no importer forgets the latter; PathConflict if the path is taken."""
    note = insert_row(
        conn,
        workspace=workspace,
        path=path,
        title=title,
        body=body,
        created=created,
        updated=updated,
        extra=extra,
        author=author,
    )
    set_extra(conn, note.id, extra, new=True)
    return note


def replace_content(
    conn: Connection,
    note: NoteRecord,
    *,
    title: str,
    body: str,
    updated: datetime,
    extra: str | None = None,
    now: datetime | None = None,
    author: Author | None = None,
) -> NoteRecord | None:
    """Optimistic: new title, body (the file's time as updated_at) and, unless ``extra`` is
    None, kept front matter if the row still has ``note.version`` (else None); the replaced
    version is kept in the history, replaced at ``now`` (default: ``updated``), and the note
    is indexed again."""
    return update_fields(
        conn,
        note,
        now=updated if now is None else now,
        author=author,
        updated_at=updated,
        extra=extra,
        title=title,
        body=body,
    )


def delete_if_version(conn: Connection, note: NoteRecord) -> bool:
    content_index.writing(conn, note.workspace)
    result = conn.execute(
        delete(notes).where(notes.c.id == note.id, notes.c.version == note.version)
    )
    if result.rowcount == 1:
        forget_front_matter(conn, note.id)
        content_index.forget_note(conn, note)
        history.forget(conn, note.id)
        return True
    return False


_EXTRA_OF = DriverRead(select(front.c.extra).where(front.c.note_id == bindparam("note_id")))


def extra_of(conn: Connection, note_id: str) -> str:
    """One note's kept front matter lines ("" if none): one indexed read, on the driver on
    SQLite (every full note result reads it)."""
    values = {"note_id": note_id}
    if uses_driver(conn):
        rows = _EXTRA_OF.all(conn, values)
    else:
        rows = conn.execute(_EXTRA_OF.statement, values).all()
    return str(rows[0][0]) if rows else ""


def extras(conn: Connection, note_ids: Sequence[str]) -> dict[str, str]:
    """Kept front matter lines by note id (notes without any are absent)."""
    found: dict[str, str] = {}
    ids = list(note_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for row in conn.execute(select(front).where(front.c.note_id.in_(chunk))):
            found[row[0]] = row[1]
    return found


# Kept front matter is written in one place (the notes repository): a change of it on an
# existing note goes through `update_fields(extra=...)`, which keeps the revision first.
set_extra = set_front_matter


@dataclass(frozen=True, slots=True)
class SyncRecord:
    """What the last sync saw of one note on both sides."""

    note_id: str
    path: str
    db_version: int
    db_hash: str
    file_hash: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> SyncRecord:
        return cls(row[0], row[1], row[2], row[3], row[4])


_SYNC_COLUMNS = (
    sync_state.c.note_id,
    sync_state.c.path,
    sync_state.c.db_version,
    sync_state.c.db_hash,
    sync_state.c.file_hash,
)


def load_sync(conn: Connection, workspace: str, folder: str) -> dict[str, SyncRecord]:
    rows = conn.execute(
        select(*_SYNC_COLUMNS).where(
            sync_state.c.workspace == workspace, sync_state.c.folder == folder
        )
    )
    return {row[0]: SyncRecord.from_row(row) for row in rows}


_FORGET_SYNC = delete(sync_state).where(
    sync_state.c.workspace == bindparam("ws"),
    sync_state.c.folder == bindparam("folder"),
    sync_state.c.note_id == bindparam("note"),
)
_INSERT_SYNC = insert(sync_state)


def save_sync(
    conn: Connection, workspace: str, folder: str, record: SyncRecord, now: datetime
) -> None:
    forget_sync(conn, workspace, folder, record.note_id)
    values = {
        "workspace": workspace,
        "folder": folder,
        "note_id": record.note_id,
        "path": record.path,
        "db_version": record.db_version,
        "db_hash": record.db_hash,
        "file_hash": record.file_hash,
        "synced_at": now,
    }
    conn.execute(_INSERT_SYNC, values)


def forget_sync(conn: Connection, workspace: str, folder: str, note_id: str) -> None:
    conn.execute(_FORGET_SYNC, {"ws": workspace, "folder": folder, "note": note_id})


def move_note(
    conn: Connection, note: NoteRecord, path: str, *, now: datetime, author: Author
) -> NoteRecord | None:
    """Optimistic rename of a note's path (a file renamed on disk, updated_at kept); None if it
    changed or the path is taken. The previous version is kept in the history."""
    from sqlalchemy.exc import IntegrityError

    try:
        with conn.begin_nested():
            return update_fields(
                conn, note, now=now, author=author, updated_at=note.updated_at, path=path
            )
    except IntegrityError:
        return None


def set_mirror(
    conn: Connection, principal: str, workspace: str, folder: str, now: datetime
) -> bool:
    """Configure (or replace) the folder of a principal's workspace; True if it was new."""
    where = (mirrors.c.principal == principal, mirrors.c.workspace == workspace)
    result = conn.execute(update(mirrors).where(*where).values(folder=folder, created_at=now))
    if result.rowcount == 1:
        return False
    conn.execute(
        insert(mirrors).values(
            principal=principal, workspace=workspace, folder=folder, created_at=now
        )
    )
    return True


def mirror_folder(conn: Connection, principal: str, workspace: str) -> str | None:
    return conn.execute(
        select(mirrors.c.folder).where(
            mirrors.c.principal == principal, mirrors.c.workspace == workspace
        )
    ).scalar_one_or_none()


def mirror_folders(conn: Connection, principal: str | None = None) -> list[str]:
    """The configured mirror folders (of one principal, or of everyone), each once."""
    query = select(mirrors.c.folder).distinct()
    if principal is not None:
        query = query.where(mirrors.c.principal == principal)
    return sorted(str(folder) for folder in conn.execute(query).scalars())
