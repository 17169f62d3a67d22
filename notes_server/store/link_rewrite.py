"""Renames keep links working: when a note's title or path changes, the links that named it
by the old one are rewritten in the linking notes' bodies, in the caller's transaction.

Every rewritten note goes through `notes.update_fields` in `_rewrite_source`, the one place a
link rewrite writes: a new version, indexed again, its previous one kept in the history (tool
"link rewrite", principal: the caller who renamed or moved the linked note), all in the
renaming tool's transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from notes_server.markup.links import (
    MARKDOWN,
    parse_links,
    relative_path,
    resolve_relative,
    rewrite,
    wiki_target_for,
)
from notes_server.store import content_index, notes
from notes_server.store.content_index import link_keys
from notes_server.store.keys import title_key
from notes_server.store.links import linking_notes
from notes_server.store.notes import NoteRecord

REWRITE_TOOL = "link rewrite"  # the tool of a rewritten note's revision


def sources_of(conn: Connection, note: NoteRecord) -> list[NoteRecord]:
    """The notes whose links resolve to ``note`` now: read BEFORE it is renamed or moved (after
    that, links by the old name no longer resolve to it), and before the transaction writes
    anything: first the workspace's rename lock, so that no write of the workspace changes
    them until the rename commits (`content_index.renaming`)."""
    content_index.renaming(conn, note.workspace)
    return linking_notes(conn, note)


def rewrite_links(
    conn: Connection,
    sources: list[NoteRecord],
    before: NoteRecord,
    after: NoteRecord,
    *,
    now: datetime,
    principal: str,
) -> list[NoteRecord]:
    """Point the links of ``sources`` that named ``before`` (by title or by path) at ``after``;
    the rewritten notes, at their new versions, each with a revision by ``principal``. Nothing
    follows a note into another workspace: links never cross one."""
    if after.workspace != before.workspace:
        return []
    rewritten = []
    author = notes.Author(principal, REWRITE_TOOL)
    for source in sources:
        body = rewritten_body(source.body, source.path, before, after)
        if body != source.body:
            updated = _rewrite_source(conn, source, body, now, author)
            if updated is not None:
                rewritten.append(updated)
    return rewritten


def rewritten_body(body: str, source_path: str, before: NoteRecord, after: NoteRecord) -> str:
    """``body`` (of a note at ``source_path``) with its links to ``before`` naming ``after``."""
    old_key = title_key(before.title)
    replacements: list[tuple[int, int, str]] = []
    for link in parse_links(body):
        keys = link_keys(source_path, link)
        if keys is None:
            continue
        new: str | None = None
        if link.kind == MARKDOWN:
            if keys.path_key == before.path and after.path != before.path:
                new = relative_path(source_path, after.path)
        elif keys.path_key == before.path:
            if after.path != before.path:
                new = after.path
        elif keys.title_key == old_key and after.title != before.title:
            new = wiki_target_for(after.title, after.path)
        if new is not None and new != body[link.target_start : link.target_end]:
            replacements.append((link.target_start, link.target_end, new))
    return rewrite(body, replacements) if replacements else body


def moved_body(note: NoteRecord, new_path: str) -> str:
    """The body of ``note`` moving to ``new_path`` in its workspace, with its own relative
    markdown links adjusted so that they still name the same notes."""
    replacements: list[tuple[int, int, str]] = []
    for link in parse_links(note.body):
        if link.kind != MARKDOWN or link.target.startswith("/"):
            continue
        target = resolve_relative(note.path, link.target)
        if target is None:
            continue
        if target == note.path:
            target = new_path  # a link to itself follows it
        new = relative_path(new_path, target)
        if resolve_relative(new_path, link.target) != target:
            replacements.append((link.target_start, link.target_end, new))
    return rewrite(note.body, replacements) if replacements else note.body


def _rewrite_source(
    conn: Connection, source: NoteRecord, body: str, now: datetime, author: notes.Author
) -> NoteRecord | None:
    """The one write of a link rewrite: through `update_fields`, so the source's previous
    version is kept in the history in this transaction."""
    return notes.update_fields(conn, source, now=now, author=author, body=body)
