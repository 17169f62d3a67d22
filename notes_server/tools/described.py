"""A note as results show it, with what the indexes know of it: its tags and front matter
properties (every note result), and its link counts (notes_read)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from notes_server.tools.titles import argument_error
from notes_server.tools.views import note_full

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.markup.properties import Value
    from notes_server.store.details import Details
    from notes_server.store.notes import NoteRecord


@cache
def _full_parts() -> tuple[
    Callable[[str], dict[str, Value]], Callable[[Connection, NoteRecord], Details]
]:
    """`properties` and `note_details`, imported at the first full note (the store loads
    SQLAlchemy), not at start, and kept: an import statement at every call cost 1.5-2.3 µs."""
    from notes_server.markup.properties import properties
    from notes_server.store.details import note_details

    return properties, note_details


def full_note(
    conn: Connection, note: NoteRecord, uri: str, *, link_counts: bool = False
) -> dict[str, Any]:
    """The full note (inside the caller's transaction): tags, properties, and with
    ``link_counts`` the counts of its outgoing, unresolved and incoming links."""
    return described_note(note, uri, _full_parts()[1](conn, note), link_counts=link_counts)


def described_note(
    note: NoteRecord, uri: str, details: Details, *, link_counts: bool = False
) -> dict[str, Any]:
    """The full note from details already read (`store.details`), as `full_note` shows it."""
    extra = details.extra
    shown = note_full(note, uri, details.tags, _full_parts()[0](extra) if extra else {})
    if link_counts:
        shown["links"] = details.counts._asdict()
    return shown


def past_note(conn: Connection, past: NoteRecord, uri: str, extra: str) -> dict[str, Any]:
    """A past version as a full note: its tags and properties from its own body and front
    matter ``extra``; its link counts are the note's current ones (the index keeps no past)."""
    from notes_server.markup.properties import properties
    from notes_server.markup.tags import tag_key
    from notes_server.store.content_index import note_tags
    from notes_server.store.details import note_details

    tags = sorted(note_tags(past.body, extra), key=tag_key)
    shown = note_full(past, uri, tags, properties(extra) if extra else {})
    shown["links"] = note_details(conn, past).counts._asdict()
    return shown


def sorted_tags(body: str) -> list[str]:
    """The tags of a new note (no front matter yet) as the index lists them: by key."""
    from notes_server.markup.tags import tag_key
    from notes_server.store.content_index import note_tags

    return sorted(note_tags(body, ""), key=tag_key)


def tags_by_note(conn: Connection, notes: Sequence[NoteRecord]) -> dict[str, list[str]]:
    from notes_server.store import tags

    return tags.tags_of(conn, [note.id for note in notes])


MAX_TAGS = 100
TAGS_ARGUMENT: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 101},
    "description": 'Tags, with or without the leading #, e.g. ["project/q3", "urgent"]',
}


def tag_arguments(tool: str, value: Any, field: str) -> list[str]:
    """A tags argument, each tag cleaned (no '#', NFC); -32602 naming the field if one is not
    a tag. (The schema checker does not look inside arrays.)"""
    from notes_server.markup.tags import clean_tag, unique

    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TAGS:
        raise argument_error(tool, field, f"must be an array of at most {MAX_TAGS} tags")
    cleaned = []
    for index, item in enumerate(value):
        tag = clean_tag(item) if isinstance(item, str) else None
        if tag is None:
            raise argument_error(
                tool,
                f"{field}[{index}]",
                "is not a tag (letters, digits, '_', '-' and '/' for nesting; not all digits)",
            )
        cleaned.append(tag)
    return unique(cleaned)


LINK_COUNTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outgoing": {"type": "integer"},
        "unresolved": {"type": "integer"},
        "incoming": {"type": "integer"},
    },
    "required": ["outgoing", "unresolved", "incoming"],
}
