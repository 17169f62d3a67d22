"""How notes appear in tool results, and the JSON schemas that describe that shape."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from notes_server.store.notes import NoteRecord

WORKSPACE_URI = {
    "type": "string",
    "format": "uri",
    "minLength": 8,
    "maxLength": 2048,
    "description": "The workspace to act in, as a file URI, e.g. file:///home/alice/notes",
}
NOTE_ID = {"type": "string", "minLength": 1, "maxLength": 64, "description": "An opaque note id"}
TITLE = {"type": "string", "minLength": 1, "maxLength": 500}

NOTE_SUMMARY_PROPERTIES: dict[str, Any] = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "path": {"type": "string"},
    "uri": {"type": "string"},
    "version": {"type": "integer"},
    "createdAt": {"type": "string"},
    "updatedAt": {"type": "string"},
    "archived": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
}
# The front matter keys beyond id/title/created/updated/tags that read as values.
PROPERTIES_SCHEMA: dict[str, Any] = {"type": "object"}
NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **NOTE_SUMMARY_PROPERTIES,
        "body": {"type": "string"},
        "properties": PROPERTIES_SCHEMA,
    },
    "required": [*NOTE_SUMMARY_PROPERTIES, "body", "properties"],
}
NOTE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"note": NOTE_SCHEMA},
    "required": ["note"],
}


def iso(moment: datetime | None) -> str | None:
    """ISO-8601 UTC with a Z suffix (the store returns aware UTC; naive counts as UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is not None and moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    # Formatted from the fields with %: twice as fast as isoformat() on an aware value (and
    # faster than an f-string), for every timestamp of every note in a result.
    m = moment
    fields = (m.year, m.month, m.day, m.hour, m.minute, m.second)
    return "%04d-%02d-%02dT%02d:%02d:%02dZ" % fields  # noqa: UP031


def note_summary(note: NoteRecord, uri: str, tags: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "id": note.id,
        "title": note.title,
        "path": note.path,
        "uri": uri,
        "version": note.version,
        "createdAt": iso(note.created_at),
        "updatedAt": iso(note.updated_at),
        "archived": note.archived,
        "tags": list(tags),
    }


def note_full(
    note: NoteRecord,
    uri: str,
    tags: Sequence[str] = (),
    properties: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {**note_summary(note, uri, tags), "body": note.body, "properties": properties or {}}


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An input schema that refuses unknown arguments."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# The input of the tools that take nothing but one note by id (notes_read, notes_restore).
NOTE_BY_ID_INPUT = schema(
    {"workspaceUri": WORKSPACE_URI, "noteId": NOTE_ID}, ["workspaceUri", "noteId"]
)
