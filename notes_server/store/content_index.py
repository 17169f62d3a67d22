"""What a note's text says about other notes: its links (resolved to notes of the same
workspace where possible) and its tags, kept in `note_links` and `note_tags`.

`index_note_content` is THE hook: every write of a note's title, body, path, workspace or
front matter calls it in the same transaction (today `notes.insert_row`, `update_fields`,
`folders.replace_content` and `folders.move_note`; a new write path must call it too), and
`forget_note` runs with every delete. The index is derived data: `reindex_all` rebuilds it.

Resolution, per link: the note at exactly its path, else the one note whose title key equals
its title key (a markdown link only by path); none or several: unresolved (target_id NULL).
A link never resolves across workspaces. When a note appears, changes title or path, moves or
goes, the links that could name it (old and new keys) are resolved again, so a dangling link
resolves by itself once its note exists, and an ambiguous one once only one candidate is left.

Archived notes, as search and read treat them: an archived note can still be read by id, so a
link to it stays resolved (`notes_links` marks it `archived`), and its own links stay indexed;
but like search it steps aside for live notes: a title resolves to the one live note with it,
and to an archived one only when no live note has it (path links name exactly one note,
archived or not). Archive and restore therefore resolve again the links by the note's title:
archiving one of two notes sharing a title resolves `[[Title]]` to the other, restoring it
makes the title ambiguous again; a link left dangling by two archived twins resolves to the
one restored.

Renames against concurrent writes (PostgreSQL; SQLite runs one write transaction at a time):
a rename reads the notes linking to it and rewrites them, so a linking note must not change
between the two, nor a new link by the old name resolve meanwhile. Every note write of a
workspace first takes a shared transaction-scoped advisory lock on it (`writing`, before any
row is touched), and a rename takes it exclusively (`renaming`, before it reads its linking
notes): a write in flight finishes first and the rename then reads what it committed; a write
arriving later waits, then finds the rewritten note at a new version (a conflict, which
notes_edit re-applies) or resolves its links against the new name.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from notes_server.markup.links import MARKDOWN, Link, parse_links, resolve_relative
from notes_server.markup.properties import front_matter_tags
from notes_server.markup.stable import same_links_and_tags
from notes_server.markup.tags import body_tags, tag_key, unique
from notes_server.store.engine import (
    DriverRead,
    DriverWrite,
    driver_connection,
    read_all,
    uses_driver,
)
from notes_server.store.keys import lookup_key, lookup_key_of, title_key
from notes_server.store.models import front_matter_table as front
from notes_server.store.models import links_table as links
from notes_server.store.models import notes_table as notes
from notes_server.store.models import tags_table as tags

MAX_TITLE_TARGET = 500  # longer than any title: a wiki target this long can only be a path
CHUNK = 500

# The statements of every write, built once and run on the driver on SQLite (as the notes
# repository does): building and compiling them per write cost more than running them.
_DELETE_LINKS = DriverWrite(delete(links).where(links.c.note_id == bindparam("note_id")))
_DELETE_TAGS = DriverWrite(delete(tags).where(tags.c.note_id == bindparam("note_id")))
_INSERT_TAG = insert(tags)
_DELETE_LINK = delete(links).where(
    links.c.note_id == bindparam("link_note"), links.c.position == bindparam("link_position")
)
_DELETE_TAG = delete(tags).where(
    tags.c.note_id == bindparam("tag_note"), tags.c.tag_key == bindparam("key")
)
_EXTRA = DriverRead(select(front.c.extra).where(front.c.note_id == bindparam("note_id")))
# A note's stored links as `LinkRow`s and its tags: what an edit compares.
_STORED_LINKS = DriverRead(
    select(
        links.c.position,
        links.c.kind,
        links.c.target,
        links.c.heading,
        links.c.path_key,
        links.c.title_key,
    ).where(links.c.note_id == bindparam("note_id"))
)
_STORED_TAGS = DriverRead(
    select(tags.c.tag_key, tags.c.tag).where(tags.c.note_id == bindparam("note_id"))
)


def _resolved(workspace: Any, path_key: Any, title_key: Any) -> Any:
    """The note a link with these keys names in ``workspace`` (column or bound values), as one
    SQL expression: the note at exactly its path, else the one live note with its title key,
    else the one archived note with it when no live note has it; else NULL. Each side is one
    probe of a notes index, so a whole set of links resolves inside the statement that writes
    them (the insert of a note's links, the re-resolution of the links naming a note)."""
    by_path = (
        select(notes.c.id)
        .where(notes.c.workspace == workspace, notes.c.path == path_key)
        .scalar_subquery()
    )
    zero: Any = literal_column("0")
    one: Any = literal_column("1")
    live = func.sum(case((notes.c.archived, zero), else_=one))
    by_title = (
        select(
            case(
                (live == one, func.max(case((notes.c.archived, null()), else_=notes.c.id))),
                (and_(live == zero, func.count() == one), func.max(notes.c.id)),
            )
        )
        .where(notes.c.workspace == workspace, notes.c.title_key == title_key)
        .scalar_subquery()
    )
    return func.coalesce(by_path, by_title)


# One link row, resolved where it is inserted (bind names apart from the column names, which
# an INSERT reserves for its own values).
_INSERT_LINK = insert(links).values(
    workspace=bindparam("ws"),
    note_id=bindparam("nid"),
    position=bindparam("pos"),
    kind=bindparam("kd"),
    target=bindparam("tgt"),
    heading=bindparam("hd"),
    path_key=bindparam("pk"),
    title_key=bindparam("tk"),
    lookup_key=bindparam("lk"),
    target_id=_resolved(bindparam("ws"), bindparam("pk"), bindparam("tk")),
)
# Resolve again the links that could name a note by one of two paths or two title keys (a
# note's old and new ones; the same twice when there is one): the lookup index finds the
# candidates by the lookup keys of those paths and titles, the exact keys keep the links that
# match; only a link whose resolution changes is written.
_TARGET = _resolved(links.c.workspace, links.c.path_key, links.c.title_key)
_RERESOLVE = DriverWrite(
    update(links)
    .where(
        links.c.workspace == bindparam("in_workspace"),
        links.c.lookup_key.in_([bindparam(f"lookup{i}") for i in range(1, 5)]),
        or_(
            links.c.path_key.in_([bindparam("path1"), bindparam("path2")]),
            links.c.title_key.in_([bindparam("title1"), bindparam("title2")]),
        ),
        links.c.target_id.is_distinct_from(_TARGET),
    )
    .values(target_id=_TARGET)
)


# The advisory locks of `writing` and `renaming`: (this key space, hashtext(workspace)). Two
# int4 keys, a space apart from the single-bigint locks of nonces and migrations.
LOCK_SPACE = 0x4C4E4B  # "LNK"
_LOCKS = {
    "postgresql": (
        text("SELECT pg_advisory_xact_lock_shared(:space, hashtext(:workspace))"),
        text("SELECT pg_advisory_xact_lock(:space, hashtext(:workspace))"),
    )
}


def writing(conn: Connection, *workspaces: str) -> None:
    """Before a note write in these workspaces (its first statement): wait for a rename in
    them to commit. Shared: writes do not wait for each other. Sorted, so that two writes
    taking two workspaces cannot deadlock."""
    locks = _LOCKS.get(conn.dialect.name)
    if locks is not None:
        for workspace in sorted(set(workspaces)):
            conn.execute(locks[0], {"space": LOCK_SPACE, "workspace": workspace})


def renaming(conn: Connection, workspace: str) -> None:
    """Before a rename reads the notes linking to it (the first lock of its transaction):
    wait for the workspace's writes in flight, and hold later ones until it commits."""
    locks = _LOCKS.get(conn.dialect.name)
    if locks is not None:
        conn.execute(locks[1], {"space": LOCK_SPACE, "workspace": workspace})


_TAG_COLUMNS = ("note_id", "tag_key", "workspace", "tag")


def _insert_sql(table: str, columns: Sequence[str]) -> tuple[str, Sequence[str]]:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", columns


_TAG_SQL = _insert_sql("note_tags", _TAG_COLUMNS)


def _write(stmt: DriverWrite, conn: Connection, values: dict[str, Any]) -> None:
    if uses_driver(conn):
        stmt.rowcount(conn, values)
    else:
        conn.execute(stmt.statement, values)


class Indexed(Protocol):
    """What indexing needs of a note (a `notes.NoteRecord` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def workspace(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def body(self) -> str: ...


class LinkKeys(NamedTuple):
    """What a parsed link can match: a workspace path, a title key (None: path only)."""

    path_key: str | None
    title_key: str | None


def link_keys(source_path: str, link: Link) -> LinkKeys | None:
    """The keys of ``link`` in a note at ``source_path``; None if it can name no note (a
    relative path that climbs out of the workspace)."""
    if link.kind == MARKDOWN:
        path = resolve_relative(source_path, link.target)
        return None if path is None else LinkKeys(path, None)
    path = link.target.removeprefix("/")
    path_key = (path if path.isascii() else unicodedata.normalize("NFC", path)) or None
    key = title_key(link.target) if len(link.target) <= MAX_TITLE_TARGET else None
    return LinkKeys(path_key, key or None)


def note_tags(body: str, extra: str) -> list[str]:
    """A note's tags: front matter first, then the body's, each once, as first written."""
    return list(_note_tags(body, extra))


@lru_cache(maxsize=8)
def _note_tags(body: str, extra: str) -> tuple[str, ...]:
    """Cached: a write indexes the tags, then its result shows them (the same body twice)."""
    if not extra:  # no front matter (most notes): the body's tags, each once already
        return tuple(body_tags(body))
    return tuple(unique([*front_matter_tags(extra), *body_tags(body)]))


class LinkRow(NamedTuple):
    """A link as `note_links` keeps it, resolution aside: what decides whether a stored row
    still stands for the body (same place in the order, same text, same keys). A backlink's
    context is not kept: `links.incoming` cuts it from the body it reads."""

    position: int
    kind: str
    target: str
    heading: str | None
    path_key: str | None
    title_key: str | None


def _has_link_syntax(body: str) -> bool:
    return "[[" in body or "](" in body


@lru_cache(maxsize=8)
def link_rows(body: str, source_path: str) -> tuple[LinkRow, ...]:
    """The link rows of ``body`` in a note at ``source_path``. Cached: an edit compares the
    rows of the body it replaces (most often the one the previous write indexed) with its own."""
    if not _has_link_syntax(body):
        return ()
    rows = []
    for position, link in enumerate(parse_links(body)):
        keys = link_keys(source_path, link)
        if keys is not None:
            rows.append(
                LinkRow(
                    position,
                    link.kind,
                    link.target,
                    link.heading[:500] if link.heading else None,
                    keys.path_key,
                    keys.title_key,
                )
            )
    return tuple(rows)


def _body_tags(body: str) -> tuple[str, ...]:
    return () if "#" not in body else _note_tags(body, "")


def index_note_content(
    conn: Connection,
    note: Indexed,
    *,
    extra: str | None = None,
    previous: Indexed | None = None,
    new: bool = False,
) -> None:
    """Bring the links and tags of ``note`` (as now stored) up to date, then resolve again the
    links that could name it by its current or its ``previous`` path and title. ``extra``: its
    front matter lines (None: unchanged, read from the store if needed); ``new``: just
    inserted, nothing indexed yet; ``previous``: the note as it was stored until this write.

    Only what changed is written: the rows of the body the note had are what the index holds
    (every write goes through here), so when its links or tags read the same as the new
    body's (an edit away from them, or no link/tag syntax at all), their rows stay, and
    otherwise only the rows that differ are deleted and inserted."""
    if new:
        _insert_links(conn, note, link_rows(note.body, note.path))
        _insert_tags(conn, note, _note_tags(note.body, extra or ""))
    elif previous is None or previous.workspace != note.workspace:
        # Every row names the workspace: all of them go, and resolve again where they now are.
        _write(_DELETE_LINKS, conn, {"note_id": note.id})
        _write(_DELETE_TAGS, conn, {"note_id": note.id})
        if extra is None:
            extra = _stored_extra(conn, note.id)
        _insert_links(conn, note, link_rows(note.body, note.path))
        _insert_tags(conn, note, _note_tags(note.body, extra))
    elif note.path == previous.path and same_links_and_tags(previous.body, note.body):
        # The edit is away from every link and tag (told without parsing either body): the
        # rows stand; only a front matter change can change the tags.
        if extra is not None:
            _sync_tags(conn, note, _note_tags(note.body, extra))
    else:
        rows = link_rows(note.body, note.path)
        if rows != link_rows(previous.body, previous.path):
            _sync_links(conn, note, rows)
        if extra is not None or _body_tags(note.body) != _body_tags(previous.body):
            if extra is None:
                extra = _stored_extra(conn, note.id)
            _sync_tags(conn, note, _note_tags(note.body, extra))
    if previous is None:
        _reresolve(conn, note.workspace, [note.path], [title_key(note.title)])
    elif (previous.workspace, previous.path, previous.title) != (
        note.workspace,
        note.path,
        note.title,
    ):
        keys = ([previous.path, note.path], [title_key(previous.title), title_key(note.title)])
        if previous.workspace != note.workspace:
            _reresolve(conn, previous.workspace, [previous.path], [title_key(previous.title)])
            keys = ([note.path], [title_key(note.title)])
        _reresolve(conn, note.workspace, *keys)


def archive_changed(conn: Connection, note: Indexed) -> None:
    """A note was archived or restored: the links naming it by its title resolve again (live
    notes take a title before archived ones)."""
    _reresolve(conn, note.workspace, [note.path], [title_key(note.title)])


def forget_note(conn: Connection, note: Indexed) -> None:
    """A note is gone: drop its links and tags; links that named it resolve again (to nothing,
    or to the one note left with that title)."""
    _write(_DELETE_LINKS, conn, {"note_id": note.id})
    _write(_DELETE_TAGS, conn, {"note_id": note.id})
    _reresolve(conn, note.workspace, [note.path], [title_key(note.title)])


def _stored_extra(conn: Connection, note_id: str) -> str:
    found = read_all(_EXTRA, conn, {"note_id": note_id})
    return str(found[0][0]) if found else ""


def _insert_links(conn: Connection, note: Indexed, rows: Sequence[LinkRow]) -> None:
    """Insert ``rows`` as links of ``note``, each resolved in its workspace as it is written."""
    if not rows:
        return
    values = [
        {
            "ws": note.workspace,
            "nid": note.id,
            "pos": row.position,
            "kd": row.kind,
            "tgt": row.target,
            "hd": row.heading,
            "pk": row.path_key,
            "tk": row.title_key,
            "lk": _lookup_key(row),
        }
        for row in rows
    ]
    if uses_driver(conn):
        driver_connection(conn).executemany(_driver_insert_link(conn), values)
    else:
        conn.execute(_INSERT_LINK, values)


def _lookup_key(row: LinkRow) -> str:
    """`keys.lookup_key` of a link: of its workspace path for a markdown link, of its target
    text for a wiki link (whose title key, when it has one, is that of the same text)."""
    if row.kind == MARKDOWN:
        return lookup_key(row.path_key or "")
    if row.title_key is not None:
        return lookup_key_of(row.title_key)
    return lookup_key(row.target)


_DRIVER_INSERT_LINK: list[str] = []


def _driver_insert_link(conn: Connection) -> str:
    """`_INSERT_LINK` compiled once for pysqlite with named parameters (the rows' dicts bind
    as they are; a name can repeat: the resolution reads the keys again)."""
    if not _DRIVER_INSERT_LINK:
        dialect = SQLiteDialect_pysqlite(paramstyle="named")
        _DRIVER_INSERT_LINK.append(_INSERT_LINK.compile(dialect=dialect).string)
    return _DRIVER_INSERT_LINK[0]


def _sync_links(conn: Connection, note: Indexed, rows: Sequence[LinkRow]) -> None:
    """Make the stored links of ``note`` (same workspace) read ``rows``: the rows that differ
    go, the missing ones are inserted and resolved; an unchanged row keeps its resolution
    (kept current by `_reresolve` as notes appear, go and change)."""
    stored = {LinkRow(*row) for row in read_all(_STORED_LINKS, conn, {"note_id": note.id})}
    wanted = set(rows)
    gone = [row.position for row in stored if row not in wanted]
    if gone and uses_driver(conn):
        driver_connection(conn).executemany(
            "DELETE FROM note_links WHERE note_id = ? AND position = ?",
            [(note.id, position) for position in gone],
        )
    elif gone:
        conn.execute(
            _DELETE_LINK, [{"link_note": note.id, "link_position": position} for position in gone]
        )
    _insert_links(conn, note, [row for row in rows if row not in stored])


def _insert_tags(conn: Connection, note: Indexed, names: Sequence[str]) -> None:
    if not names:
        return
    if uses_driver(conn):
        driver_connection(conn).executemany(
            _TAG_SQL[0], [(note.id, tag_key(tag), note.workspace, tag) for tag in names]
        )
        return
    rows = [
        {"note_id": note.id, "tag_key": tag_key(tag), "workspace": note.workspace, "tag": tag}
        for tag in names
    ]
    conn.execute(_INSERT_TAG, rows)


def _sync_tags(conn: Connection, note: Indexed, names: Sequence[str]) -> None:
    """Make the stored tags of ``note`` (same workspace) be ``names``: a tag that went, or is
    now spelled another way, is deleted; a new or respelled one inserted."""
    stored = {str(key): str(tag) for key, tag in read_all(_STORED_TAGS, conn, {"note_id": note.id})}
    wanted = {tag_key(tag): tag for tag in names}
    gone = [key for key, tag in stored.items() if wanted.get(key) != tag]
    if gone and uses_driver(conn):
        driver_connection(conn).executemany(
            "DELETE FROM note_tags WHERE note_id = ? AND tag_key = ?",
            [(note.id, key) for key in gone],
        )
    elif gone:
        conn.execute(_DELETE_TAG, [{"tag_note": note.id, "key": key} for key in gone])
    _insert_tags(conn, note, [tag for key, tag in wanted.items() if stored.get(key) != tag])


def _reresolve(
    conn: Connection, workspace: str, paths: Sequence[str], title_keys: Sequence[str]
) -> None:
    """Resolve again every link of ``workspace`` whose path or title key is one of these (at
    most two of each: a note's old and new ones): one UPDATE, writing only the links whose
    target changes."""
    path1, path2 = (list(paths) * 2)[:2]
    title1, title2 = (list(title_keys) * 2)[:2]
    lookup1 = lookup_key(path1)
    lookup3 = lookup_key(title1)
    values = {
        "lookup1": lookup1,
        "lookup2": lookup1 if path2 == path1 else lookup_key(path2),
        "lookup3": lookup3,
        "lookup4": lookup3 if title2 == title1 else lookup_key(title2),
        "in_workspace": workspace,
        "path1": path1,
        "path2": path2,
        "title1": title1,
        "title2": title2,
    }
    _write(_RERESOLVE, conn, values)


def reindex_all(conn: Connection, batch: int = 1000) -> int:
    """Rebuild the index of every note (all workspaces); returns how many notes."""
    conn.execute(delete(links))
    conn.execute(delete(tags))
    last = 0
    count = 0
    columns = (notes.c.seq, notes.c.id, notes.c.workspace, notes.c.path, notes.c.title)
    while True:
        rows = conn.execute(
            select(*columns, notes.c.body, front.c.extra)
            .outerjoin(front, front.c.note_id == notes.c.id)
            .where(notes.c.seq > last)
            .order_by(notes.c.seq)
            .limit(batch)
        ).all()
        if not rows:
            break
        for row in rows:
            note = _Row(row[1], row[2], row[3], row[4], row[5])
            index_note_content(conn, note, extra=row[6] or "", new=True, previous=note)
        last = rows[-1][0]
        count += len(rows)
    return count


class _Row(NamedTuple):
    id: str
    workspace: str
    path: str
    title: str
    body: str
