"""Reading the link index: a note's outgoing links and backlinks, their counts, and the notes
whose links name a note (what a rename rewrites). Always inside one workspace."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, and_, case, func, select

from notes_server.store.models import links_table as links
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS, NoteRecord


class Outgoing(NamedTuple):
    """One link of a note, with the note it resolves to (None: unresolved)."""

    kind: str
    text: str
    heading: str | None
    target: NoteRecord | None


class Incoming(NamedTuple):
    """A note linking to the note asked about: the first such link's context, and how many."""

    source: NoteRecord
    context: str
    links: int


class LinkCounts(NamedTuple):
    outgoing: int
    unresolved: int
    incoming: int


def outgoing(conn: Connection, note: NoteRecord, *, limit: int) -> list[Outgoing]:
    target = notes.alias("target")
    rows = conn.execute(
        select(links.c.kind, links.c.target, links.c.heading, *[target.c[c.name] for c in COLUMNS])
        .select_from(
            links.outerjoin(
                target,
                and_(target.c.id == links.c.target_id, target.c.workspace == note.workspace),
            )
        )
        .where(links.c.note_id == note.id, links.c.workspace == note.workspace)
        .order_by(links.c.position)
        .limit(limit)
    ).all()
    return [
        Outgoing(r[0], r[1], r[2], None if r[3] is None else NoteRecord.from_row(r[3:]))
        for r in rows
    ]


def incoming(conn: Connection, note: NoteRecord, *, limit: int) -> list[Incoming]:
    """The notes of the same workspace with a link resolved to ``note``, by path."""
    first = (
        select(
            links.c.note_id,
            func.min(links.c.id).label("first"),
            func.count().label("links"),
        )
        .where(links.c.target_id == note.id, links.c.workspace == note.workspace)
        .group_by(links.c.note_id)
        .subquery()
    )
    rows = conn.execute(
        select(*COLUMNS, links.c.context, first.c.links)
        .select_from(first)
        .join(links, links.c.id == first.c.first)
        .join(notes, and_(notes.c.id == first.c.note_id, notes.c.workspace == note.workspace))
        .order_by(notes.c.path)
        .limit(limit)
    ).all()
    width = len(COLUMNS)
    return [Incoming(NoteRecord.from_row(r), str(r[width]), int(r[width + 1])) for r in rows]


def counts(conn: Connection, note: NoteRecord) -> LinkCounts:
    """Outgoing links, how many of them unresolved, and how many notes link here."""
    mine = conn.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((links.c.target_id.is_(None), 1), else_=0)), 0),
        ).where(links.c.note_id == note.id, links.c.workspace == note.workspace)
    ).one()
    theirs = conn.execute(
        select(func.count(func.distinct(links.c.note_id))).where(
            links.c.target_id == note.id, links.c.workspace == note.workspace
        )
    ).scalar_one()
    return LinkCounts(int(mine[0]), int(mine[1]), int(theirs))


def linking_notes(conn: Connection, note: NoteRecord) -> list[NoteRecord]:
    """The notes (this one excluded) whose links resolve to ``note``: what a rename rewrites."""
    sources = (
        select(links.c.note_id)
        .where(links.c.target_id == note.id, links.c.workspace == note.workspace)
        .distinct()
    )
    rows = conn.execute(
        select(*COLUMNS)
        .where(notes.c.id.in_(sources), notes.c.workspace == note.workspace)
        .where(notes.c.id != note.id)
        .order_by(notes.c.path)
    ).all()
    return [NoteRecord.from_row(r) for r in rows]
