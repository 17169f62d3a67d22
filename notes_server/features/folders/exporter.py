"""`export`: one markdown file per live note, written atomically below the folder."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from notes_server.features.folders.notefile import render
from notes_server.features.folders.progress import Progress, Stop, stopping
from notes_server.features.folders.summary import Summary
from notes_server.features.folders.walker import read_checked
from notes_server.features.folders.writer import WriteRefused, open_parent, write_atomic
from notes_server.security.uri import WorkspaceUri, parse_note_path

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from notes_server.store.notes import NoteRecord

MAX_EXISTING = 4_000_000


def export_workspace(
    engine: Engine,
    root_fd: int,
    workspace: WorkspaceUri,
    progress: Progress | None = None,
    stop: Stop | None = None,
) -> Summary:
    """Write every live note; a file already holding the same bytes is left alone. Once
    `stop` is set, the note being written is the last."""
    from notes_server.store import folders
    from notes_server.store.engine import read_tx

    with read_tx(engine) as conn:
        records = folders.live_notes(conn, workspace.uri)
        extra = folders.extras(conn, [note.id for note in records])
    summary = Summary()
    if progress is not None:
        progress.start(len(records))
    for note in records:
        data = render(
            note.id, note.title, note.body, note.created_at, note.updated_at, extra.get(note.id, "")
        )
        export_note(root_fd, note, data, summary)
        if progress is not None:
            progress.advance(len(data))
        if stopping(stop):
            summary.interrupted = True
            break
    return summary


def export_note(root_fd: int, note: NoteRecord, data: bytes, summary: Summary) -> bool:
    """Write one note's file; True if the file now holds ``data``."""
    segments = parse_note_path(note.path)
    try:
        parent = open_parent(root_fd, segments[:-1], create=True)
    except WriteRefused as exc:
        summary.refuse(note.path, str(exc))
        return False
    try:
        current = read_checked(parent, segments[-1], segments, None, MAX_EXISTING)
        if getattr(current, "data", None) == data:
            summary.count("unchanged")
            return True
        write_atomic(parent, segments[-1], data)
    except WriteRefused as exc:
        summary.refuse(note.path, str(exc))
        return False
    finally:
        os.close(parent)
    summary.count("exported")
    return True
