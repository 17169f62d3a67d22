"""`sync`: two-way between a workspace and a folder, remembering what each side last held.

Per note, the state records the database version and content hash and the file's content hash
at the last sync. A side changed since then is applied to the other; both changed (to different
content) keeps both: the database version stays at the path and the file's version becomes a
"(conflict)" note and file next to it. A deletion propagates only when the other side is
unchanged; otherwise the survivor is kept. A file that disappeared while a new file with its
exact content appeared is a rename. Nothing is ever lost.

Every deletion a sync propagates (either way), every survivor it keeps instead and every
conflict copy it makes is written to the audit log, with the actor, "sync" as the tool and the
note's id, title and path, in the same transaction as the change.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from notes_server.features.folders.exporter import export_note
from notes_server.features.folders.importer import alternative, drafts
from notes_server.features.folders.notefile import Draft, content_hash, render
from notes_server.features.folders.progress import Progress, Stop, stopping
from notes_server.features.folders.summary import Summary
from notes_server.features.folders.walker import Limits, count_notes
from notes_server.features.folders.writer import WriteRefused, open_parent, remove
from notes_server.security.uri import WorkspaceUri, parse_note_path

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from notes_server.store.folders import SyncRecord
    from notes_server.store.notes import NoteRecord


@dataclass
class FileSide:
    """The folder as the walker saw it by path: drafts, the hashes of the files' bytes (what
    "changed on disk" and renames compare) and of their note content (what conflicts compare),
    and refused paths (never mistaken for deleted ones)."""

    drafts: dict[str, Draft] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    content: dict[str, str] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)


def read_side(
    root_fd: int,
    workspace: WorkspaceUri,
    limits: Limits,
    summary: Summary,
    progress: Progress | None = None,
    stop: Stop | None = None,
) -> FileSide:
    side = FileSide()
    if progress is not None:
        progress.start(count_notes(root_fd, limits))
    for draft in drafts(root_fd, workspace, limits, summary, progress):
        side.drafts[draft.path] = draft
        side.hashes[draft.path] = draft.raw_hash
        side.content[draft.path] = content_hash(draft.title, draft.body, draft.extra)
        if stopping(stop):
            break  # a partial side must never be reconciled: unread files would look deleted
    side.refused = {path for _action, path, _reason in summary.problems}
    return side


def sync_folder(
    engine: Engine,
    root_fd: int,
    workspace: WorkspaceUri,
    folder: str,
    now: datetime,
    limits: Limits | None = None,
    *,
    actor: str,
    progress: Progress | None = None,
    stop: Stop | None = None,
) -> Summary:
    """One full reconcile in one write transaction (files are written inside it, so a crash
    leaves state behind the files, and the next run finds equal hashes and records them).
    `actor`: who the audit log names for what this sync deletes or keeps; `progress` follows
    the reading of the folder (the long part). `stop` set while the folder is read: nothing
    is reconciled; while reconciling: the note or file at hand is the last, and what was
    reconciled is committed (every step records its own sync state, so the next run goes on
    from there)."""
    from notes_server.store.engine import write_tx

    summary = Summary()
    files = read_side(root_fd, workspace, limits or Limits(), summary, progress, stop)
    if stopping(stop):
        return Summary(interrupted=True)
    with write_tx(engine) as conn:
        _Sync(conn, root_fd, workspace.uri, folder, summary, now, actor, stop).run(files)
    summary.interrupted = stopping(stop)
    return summary


class _Sync:
    def __init__(
        self,
        conn: Connection,
        root_fd: int,
        workspace: str,
        folder: str,
        summary: Summary,
        now: datetime,
        actor: str,
        stop: Stop | None = None,
    ) -> None:
        from notes_server.store import folders

        self.stop = stop
        self.conn, self.root_fd, self.summary, self.now = conn, root_fd, summary, now
        from notes_server.store.notes import Author

        self.actor = actor
        self.author = Author(actor, "sync")
        self.workspace, self.folder = workspace, folder
        self.notes = {note.id: note for note in folders.live_notes(conn, workspace)}
        self.extra = folders.extras(conn, list(self.notes))
        self.state = folders.load_sync(conn, workspace, folder)
        self.claimed: set[str] = set()

    def run(self, files: FileSide) -> None:
        self.files = files
        known = {r.path for r in self.state.values()} | {n.path for n in self.notes.values()}
        self.untracked = {p: h for p, h in files.hashes.items() if p not in known}
        for record in list(self.state.values()):
            if stopping(self.stop):
                return
            self._tracked(record)
        for note in list(self.notes.values()):
            if stopping(self.stop):
                return
            if note.id not in self.state:
                self._new_note(note)
        for path in sorted(self.untracked):
            if stopping(self.stop):
                return
            if path not in self.claimed:
                self._new_file(path)

    # --- one note that the last sync saw -----------------------------------------------

    def _tracked(self, record: SyncRecord) -> None:
        note = self.notes.get(record.note_id)
        if record.path in self.files.refused or (note and note.path in self.files.refused):
            return
        self.claimed.add(record.path)
        if note is not None:
            self.claimed.add(note.path)
        file_hash = self.files.hashes.get(record.path)
        db_changed = note is None or note.version != record.db_version
        file_changed = file_hash != record.file_hash
        if note is None:
            self._gone_from_store(record, file_hash, file_changed)
        elif file_hash is None:
            self._gone_from_folder(record, note, db_changed)
        elif db_changed and file_changed and self._hash(note) != self.files.content[record.path]:
            self._conflict(note, self.files.drafts[record.path])
        elif db_changed:
            self._export(note, old_path=record.path)
        elif file_changed:
            self._apply_file(note, self.files.drafts[record.path])
        else:
            self.summary.count("unchanged")

    def _gone_from_store(self, record: SyncRecord, file_hash: str | None, changed: bool) -> None:
        from notes_server.store import folders

        if file_hash is not None and changed:
            kept = self._new_file(record.path)  # edited on disk: the survivor is kept
            if kept is not None:
                self._audit("file kept", kept.id, kept.title, kept.path)
        elif file_hash is not None:
            title = self.files.drafts[record.path].title
            if self._remove(record.path):
                self.summary.count("deleted")
                self._audit("file removed", record.note_id, title, record.path)
        folders.forget_sync(self.conn, self.workspace, self.folder, record.note_id)

    def _gone_from_folder(self, record: SyncRecord, note: NoteRecord, db_changed: bool) -> None:
        from notes_server.store import folders

        if db_changed:
            self._export(note)  # edited in the store: the survivor is kept
            self._audit("note kept", note.id, note.title, note.path)
            return
        renamed = self._renamed_to(record.file_hash)
        if renamed is not None:
            moved = folders.move_note(self.conn, note, renamed, now=self.now, author=self.author)
            if moved is not None:
                self.summary.count("updated")
                self._save(moved, self.files.hashes[renamed])
                return
        if folders.delete_if_version(self.conn, note):
            folders.forget_sync(self.conn, self.workspace, self.folder, note.id)
            self.summary.count("deleted")
            self._audit("deleted", note.id, note.title, note.path)

    def _renamed_to(self, file_hash: str) -> str | None:
        for path, candidate in sorted(self.untracked.items()):
            if candidate == file_hash and path not in self.claimed:
                self.claimed.add(path)
                return path
        return None

    # --- notes and files the last sync did not see -------------------------------------

    def _new_note(self, note: NoteRecord) -> None:
        if note.path in self.files.refused:
            return
        self.claimed.add(note.path)
        file_hash = self.files.hashes.get(note.path)
        if file_hash is None:
            self._export(note)
        elif self.files.content[note.path] == self._hash(note):
            self.summary.count("unchanged")
            self._save(note, file_hash)
        else:
            self._conflict(note, self.files.drafts[note.path])

    def _new_file(self, path: str) -> NoteRecord | None:
        from notes_server.store import folders
        from notes_server.store.notes import PathConflict

        self.claimed.add(path)
        draft = self.files.drafts[path]
        try:
            note = folders.insert_imported(
                self.conn,
                workspace=self.workspace,
                path=path,
                title=draft.title,
                body=draft.body,
                created=draft.created,
                updated=draft.updated,
                extra=draft.extra,
                author=self.author,
            )
        except PathConflict:
            self.summary.skip(path, "an archived note holds this path")
            return None
        self.extra[note.id] = draft.extra
        self.summary.count("imported")
        self._save(note, self.files.hashes[path])
        return note

    # --- actions ---------------------------------------------------------------------

    def _conflict(self, note: NoteRecord, draft: Draft) -> None:
        """The store's version stays at the path; the file's becomes a "(conflict)" note and
        file beside it, written before the original file is replaced."""
        from notes_server.store import folders

        path = self._free_path(note.path)
        copy = folders.insert_imported(
            self.conn,
            workspace=self.workspace,
            path=path,
            title=draft.title,
            body=draft.body,
            created=draft.created,
            updated=self.now,
            extra=draft.extra,
            author=self.author,
        )
        self.extra[copy.id] = draft.extra
        self.claimed.add(path)
        if self._export(copy):
            self._export(note)
        self.summary.conflict(note.path, path)
        self._audit("conflict kept", copy.id, copy.title, copy.path)

    def _free_path(self, path: str) -> str:
        from notes_server.store import folders

        taken = set(folders.notes_by_path(self.conn, self.workspace)) | set(self.files.drafts)
        taken |= self.files.refused
        n = 1
        while (candidate := alternative(path, "conflict", n)) in taken:
            n += 1
        return candidate

    def _apply_file(self, note: NoteRecord, draft: Draft) -> None:
        from notes_server.store import folders

        updated = folders.replace_content(
            self.conn,
            note,
            title=draft.title,
            body=draft.body,
            extra=draft.extra,
            updated=self.now,
            now=self.now,
            author=self.author,
        )
        if updated is None:
            return
        self.extra[note.id] = draft.extra
        self.summary.count("updated")
        self._save(updated, self.files.hashes[draft.path])

    def _export(self, note: NoteRecord, old_path: str | None = None) -> bool:
        extra = self.extra.get(note.id, "")
        data = render(note.id, note.title, note.body, note.created_at, note.updated_at, extra)
        if not export_note(self.root_fd, note, data, self.summary):
            return False
        if old_path is not None and old_path != note.path:
            self._remove(old_path)  # moved in the store
        self._save(note, hashlib.sha256(data).hexdigest())
        return True

    def _remove(self, path: str) -> bool:
        """Remove a file; False (and the reason in the summary) when its folder is refused."""
        segments = parse_note_path(path)
        try:
            parent = open_parent(self.root_fd, segments[:-1], create=False)
        except WriteRefused as exc:
            self.summary.refuse(path, str(exc))
            return False
        try:
            remove(parent, segments[-1])
        finally:
            os.close(parent)
        return True

    def _audit(self, outcome: str, note_id: str, title: str, path: str) -> None:
        """One audit entry for what this sync deleted, or kept instead of deleting."""
        from notes_server.store import audit

        entry = audit.AuditRecord(
            at=self.now,
            principal=self.actor,
            tool="sync",
            outcome=outcome,
            workspace=self.workspace,
            note_id=note_id,
            note_title=title,
            note_path=path,
            nonce=None,
        )
        audit.record(self.conn, entry)

    def _hash(self, note: NoteRecord) -> str:
        return content_hash(note.title, note.body, self.extra.get(note.id, ""))

    def _save(self, note: NoteRecord, file_hash: str) -> None:
        from notes_server.store import folders

        record = folders.SyncRecord(note.id, note.path, note.version, self._hash(note), file_hash)
        folders.save_sync(self.conn, self.workspace, self.folder, record, self.now)
        self.state[note.id] = record
