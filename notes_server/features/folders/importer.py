"""`import`: files under a folder become notes; importing twice changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from notes_server.errors import UriError
from notes_server.features.folders.notefile import Draft, NotAnote, read_draft
from notes_server.features.folders.progress import Progress, Stop, stopping
from notes_server.features.folders.summary import Summary
from notes_server.features.folders.walker import Limits, NoteFile, Refusal, count_notes, walk
from notes_server.security.uri import WorkspaceUri

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from notes_server.store.notes import Author, NoteRecord

POLICIES = ("skip", "overwrite", "rename")
BATCH = 500


@dataclass(frozen=True, slots=True)
class ImportOptions:
    policy: str = "skip"
    dry_run: bool = False
    limits: Limits = field(default_factory=Limits)
    # Who the history names for the notes this import writes, and with which tool.
    principal: str = "operator"
    tool: str = "import"
    # Files per write transaction. A task imports in smaller ones: its progress then follows
    # what is committed, and a cancellation (a write of its own) waits for one short batch.
    batch: int = BATCH


def drafts(
    root_fd: int,
    workspace: WorkspaceUri,
    limits: Limits,
    summary: Summary,
    progress: Progress | None = None,
) -> Iterator[Draft]:
    """The notes a folder describes; everything refused is recorded in ``summary``."""
    for item in walk(root_fd, limits):
        if isinstance(item, Refusal):
            summary.refuse(item.path, item.reason)
            if progress is not None:
                progress.advance(0)
            continue
        summary.bytes_read += len(item.data)
        if progress is not None:
            progress.advance(len(item.data))
        draft = _draft(item, workspace, summary)
        if draft is not None:
            yield draft


def _draft(item: NoteFile, workspace: WorkspaceUri, summary: Summary) -> Draft | None:
    try:
        workspace.note_uri(item.path)
        return read_draft(item)
    except UriError as exc:
        summary.refuse("/".join(item.path), f"name refused: {exc}")
    except NotAnote as exc:
        summary.refuse("/".join(item.path), str(exc))
    return None


def import_folder(
    engine: Engine,
    root_fd: int,
    workspace: WorkspaceUri,
    options: ImportOptions,
    progress: Progress | None = None,
    stop: Stop | None = None,
) -> Summary:
    """Import in batches of write transactions (rolled back on a dry run). Once `stop` is
    set, the file being applied is the last: what was applied is committed and counted."""
    summary = Summary()
    batch: list[Draft] = []
    if progress is not None:
        progress.start(count_notes(root_fd, options.limits))
    for draft in drafts(root_fd, workspace, options.limits, summary, progress):
        batch.append(draft)
        if len(batch) >= options.batch or stopping(stop):
            _apply(engine, batch, workspace.uri, options, summary, stop)
            batch = []
        if stopping(stop):
            break
    if batch:
        _apply(engine, batch, workspace.uri, options, summary, stop)
    summary.interrupted = stopping(stop)
    return summary


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


def _apply(
    engine: Engine,
    batch: list[Draft],
    workspace: str,
    options: ImportOptions,
    summary: Summary,
    stop: Stop | None = None,
) -> None:
    from notes_server.store.engine import write_tx
    from notes_server.store.notes import Author

    author = Author(options.principal, options.tool)
    try:
        with write_tx(engine) as conn:
            known = Known.load(conn, workspace, [draft.path for draft in batch])
            for draft in batch:
                apply_draft(conn, workspace, draft, options.policy, summary, known, author)
                if stopping(stop):
                    break
            if options.dry_run:
                raise _DryRun
    except _DryRun:
        pass


@dataclass(frozen=True, slots=True)
class Known:
    """The notes (and their kept front matter) at a batch's paths, read in two queries."""

    notes: dict[str, NoteRecord]
    extras: dict[str, str]

    @classmethod
    def load(cls, conn: Connection, workspace: str, paths: list[str]) -> Known:
        from notes_server.store import folders

        found = folders.notes_at(conn, workspace, paths)
        return cls(found, folders.extras(conn, [note.id for note in found.values()]))


def apply_draft(
    conn: Connection,
    workspace: str,
    draft: Draft,
    policy: str,
    summary: Summary,
    known: Known | None = None,
    author: Author | None = None,
) -> NoteRecord | None:
    """One file against the store: new, unchanged, or a conflict settled by ``policy``;
    ``known`` holds what is already at the draft's path, else it is looked up; ``author``:
    who the history names for what it writes."""
    from notes_server.store import folders
    from notes_server.store.notes import Author

    author = author or Author("operator", "import")

    if known is None:
        known = Known.load(conn, workspace, [draft.path])
    existing = known.notes.get(draft.path)
    if existing is None:
        return _insert(conn, workspace, draft, draft.path, summary, author)
    if (existing.title, existing.body, known.extras.get(existing.id, "")) == (
        draft.title,
        draft.body,
        draft.extra,
    ):
        summary.count("unchanged")
        return existing
    if policy == "overwrite" and not existing.archived:
        updated = folders.replace_content(
            conn,
            existing,
            title=draft.title,
            body=draft.body,
            extra=draft.extra,
            updated=draft.updated,
            now=datetime.now(UTC),
            author=author,
        )
        if updated is not None:
            summary.count("updated")
        return updated
    if policy == "rename":
        return _rename(conn, workspace, draft, summary, author)
    summary.skip(draft.path, "a different note is already at this path (--on-conflict)")
    return None


def _same(conn: Connection, note: NoteRecord, draft: Draft) -> bool:
    from notes_server.store import folders

    if (note.title, note.body) != (draft.title, draft.body):
        return False
    return folders.extras(conn, [note.id]).get(note.id, "") == draft.extra


def _insert(
    conn: Connection,
    workspace: str,
    draft: Draft,
    path: str,
    summary: Summary,
    author: Author | None = None,
) -> NoteRecord:
    from notes_server.store import folders

    note = folders.insert_imported(
        conn,
        workspace=workspace,
        path=path,
        title=draft.title,
        body=draft.body,
        created=draft.created,
        updated=draft.updated,
        extra=draft.extra,
        author=author,
    )
    summary.count("imported")
    return note


def _rename(
    conn: Connection, workspace: str, draft: Draft, summary: Summary, author: Author
) -> NoteRecord | None:
    """The first free "name (imported N).md" path, or the one already holding this content."""
    from notes_server.store import notes

    for n in range(1, 100):
        path = alternative(draft.path, "imported", n)
        existing = notes.get_note_by_path(conn, workspace, path)
        if existing is None:
            return _insert(conn, workspace, draft, path, summary, author)
        if _same(conn, existing, draft):
            summary.count("unchanged")
            return existing
    summary.skip(draft.path, "no free name for a renamed copy")
    return None


def alternative(path: str, label: str, n: int) -> str:
    """``a/b.md`` -> ``a/b (label).md``, ``a/b (label 2).md``, ..."""
    head, _, name = path.rpartition("/")
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        stem, suffix = name, ""
    tag = f" ({label})" if n == 1 else f" ({label} {n})"
    new = stem + tag + (("." + suffix) if suffix else "")
    return f"{head}/{new}" if head else new
