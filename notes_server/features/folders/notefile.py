"""A markdown file as a note, and a note as a markdown file (both directions, lossless)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

from notes_server.features.folders import frontmatter
from notes_server.features.folders.walker import NoteFile

MAX_TITLE = 500
MAX_BODY = 1_000_000
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Cn"})


class NotAnote(ValueError):
    """The file cannot become a note; the message is the reason shown in the summary."""


@dataclass(frozen=True, slots=True)
class Draft:
    """What a file says a note should be."""

    path: str
    title: str
    body: str
    created: datetime
    updated: datetime
    extra: str
    raw_hash: str


def read_draft(file: NoteFile) -> Draft:
    """Title from front matter, else the first heading, else the file name; timestamps from
    front matter, else the file's mtime; unknown front matter kept."""
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotAnote(f"not UTF-8 text (byte {exc.start})") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    try:
        parsed = frontmatter.split(text)
        mtime = datetime.fromtimestamp(file.mtime, UTC)
        created = _time(parsed.known, "created", mtime)
        updated = _time(parsed.known, "updated", mtime)
    except frontmatter.FrontMatterError as exc:
        raise NotAnote(f"front matter refused: {exc}") from None
    if len(parsed.body) > MAX_BODY:
        raise NotAnote(f"body longer than {MAX_BODY} characters")
    title = _title(parsed.known.get("title"), parsed.body, file.path[-1])
    raw = hashlib.sha256(file.data).hexdigest()
    return Draft("/".join(file.path), title, parsed.body, created, updated, parsed.extra, raw)


def _time(known: dict[str, str], key: str, default: datetime) -> datetime:
    value = known.get(key)
    return default if value is None else frontmatter.parse_time(value, key)


def _title(given: str | None, body: str, name: str) -> str:
    if given is not None:
        title = _clean(given)
        if not title:
            raise NotAnote("front matter title is empty or invisible")
        return title
    match = _HEADING.search(body)
    if match is not None and (heading := _clean(match.group(1))):
        return heading
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return _clean(stem) or name


def _clean(raw: str) -> str:
    """The title rules of the tools: NFC, whitespace collapsed, nothing invisible, bounded."""
    collapsed = " ".join(unicodedata.normalize("NFC", raw).split())
    if any(unicodedata.category(ch) in _INVISIBLE for ch in collapsed):
        raise NotAnote("title contains control or invisible characters")
    if len(collapsed) > MAX_TITLE:
        raise NotAnote(f"title longer than {MAX_TITLE} characters")
    return collapsed


def render(
    note_id: str, title: str, body: str, created: datetime, updated: datetime, extra: str
) -> bytes:
    """The file export writes; read_draft of it gives back the same title, body and times."""
    return (frontmatter.render(note_id, title, created, updated, extra) + body).encode("utf-8")


def content_hash(title: str, body: str, extra: str) -> str:
    """What sync compares: the note's content, not its file layout or timestamps."""
    digest = hashlib.sha256()
    for part in (title, body, extra):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()
