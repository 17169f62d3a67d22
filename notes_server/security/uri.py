"""Strict parsing of workspace ``file:`` URIs and relative note paths.

Workspace roots and note locations arrive from untrusted clients, so every path must have
exactly one meaning. This module accepts a deliberately small language and rejects the rest:

* only ``file:///`` URIs with an empty authority (no host, not even ``localhost``), no query
  and no fragment; the scheme is matched case-insensitively and always written as ``file``;
* the raw URI is ASCII: anything outside unreserved characters, sub-delims, ``:``, ``@``,
  ``/`` and ``%`` (e.g. a space or a raw non-ASCII letter) must be percent-encoded;
* each path segment is percent-decoded exactly once as strict UTF-8, and the decoded segment
  must not be empty, ``.``, ``..``, or contain ``/``, ``\\``, ``%`` (double encoding), control
  or invisible format characters, non-NFC text, or look-alikes of dots and slashes.

Accepted input is reduced to a tuple of decoded segments; the canonical string form is rebuilt
from those segments, so comparing workspaces and notes is a plain tuple comparison.
The module is pure: no I/O and no file-system access.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import quote

from notes_server.errors import UriError

MAX_URI_LENGTH = 2048
MAX_SEGMENT_LENGTH = 255
MAX_SEGMENTS = 64

_PREFIX = "file:///"
_SAFE = "-._~!$&'()*+,;=:@"
_HEX = frozenset("0123456789abcdefABCDEF")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Characters that may appear unencoded in a URI path: exactly what ``quote`` leaves alone,
# plus the separator and the escape character.
_RAW_PATH_CHARS = frozenset(_ALNUM + _SAFE + "/%")
_UNQUOTED = frozenset(_ALNUM + _SAFE)
# Unicode categories that are invisible, control, separator-like or not real characters.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})
_ASCII_LOOKALIKE_TARGETS = frozenset("./\\")
# Slash look-alikes that NFKC leaves unchanged, so the fold check alone would miss them.
_CONFUSABLES = frozenset(
    {
        "\u2044",  # FRACTION SLASH
        "\u2215",  # DIVISION SLASH
        "\u2216",  # SET MINUS
        "\u2571",  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
        "\u2572",  # BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
        "\u29f5",  # REVERSE SOLIDUS OPERATOR
        "\u29f8",  # BIG SOLIDUS
        "\u29f9",  # BIG REVERSE SOLIDUS
    }
)

# Not whitespace to Unicode, yet they render as nothing visible.
_BLANK_LETTERS = frozenset(
    {
        "\u115f",  # HANGUL CHOSEONG FILLER
        "\u1160",  # HANGUL JUNGSEONG FILLER
        "\u2800",  # BRAILLE PATTERN BLANK
        "\u3164",  # HANGUL FILLER
        "\uffa0",  # HALFWIDTH HANGUL FILLER
    }
)


@dataclass(frozen=True, slots=True)
class WorkspaceUri:
    """A validated workspace root; equal roots have equal ``segments``."""

    segments: tuple[str, ...]
    _uri: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Validate on construction so no code path can hold an unchecked root."""
        if not isinstance(self.segments, tuple):
            raise UriError("segments must be a tuple")
        _check_segments(self.segments)
        object.__setattr__(self, "_uri", _check_length(_build_uri(self.segments)))

    @property
    def uri(self) -> str:
        """Canonical string form; parsing it yields an equal ``WorkspaceUri``."""
        return self._uri

    def contains(self, target: WorkspaceUri | tuple[str, ...]) -> bool:
        """True iff ``target`` lies strictly below this root (a note is never the root)."""
        parts = target.segments if isinstance(target, WorkspaceUri) else target
        size = len(self.segments)
        return len(parts) > size and tuple(parts[:size]) == self.segments

    def note_uri(self, path: tuple[str, ...]) -> str:
        """Canonical URI of the note at relative ``path``; raises if limits would be exceeded."""
        if not isinstance(path, tuple) or not path:
            raise UriError("note path must be a non-empty tuple")
        _check_segments(path)
        return self._join(path)

    def stored_note_uri(self, path_text: str) -> str:
        """``note_uri(parse_note_path(path_text))``, checking each segment once (search hits)."""
        return self._join(parse_note_path(path_text))

    def _join(self, path: tuple[str, ...]) -> str:
        """``_build_uri(self.segments + path)`` for an already checked ``path``: the root's own
        segments were checked when it was constructed (the dataclass is frozen), so only the
        total count and length remain, and the root's canonical text is already known."""
        if len(self.segments) + len(path) > MAX_SEGMENTS:
            raise UriError("too many path segments")
        return _check_length(self._uri + "/" + "/".join(_quote(s) for s in path))


def parse_workspace_uri(text: str) -> WorkspaceUri:
    """Parse a workspace root URI, rejecting anything ambiguous."""
    if isinstance(text, str):
        return _remembered_workspace(text)
    return WorkspaceUri(_parse_file_uri(text))  # refused with UriError, never remembered


def parse_workspace_argument(text: str) -> WorkspaceUri:
    """A workspace as a client names it in a tool's arguments: the strict form, or that form
    with one trailing slash (`file:///home/alice/notes/` is the same folder). Everything
    else `parse_workspace_uri` refuses stays refused (`file:///a//`, `file:///`)."""
    if isinstance(text, str) and text.endswith("/") and not text.endswith("//"):
        text = text[:-1]
    return parse_workspace_uri(text)


@functools.lru_cache(maxsize=256)
def _remembered_workspace(text: str) -> WorkspaceUri:
    """A client names the same few workspaces call after call, so verdicts are remembered (a
    tenth of a `notes_read`'s CPU): the result is immutable, a refusal is never cached, and a
    text that parses is bounded by MAX_URI_LENGTH, so the cache stays small."""
    return WorkspaceUri(_parse_file_uri(text))


def parse_note_uri(text: str) -> tuple[str, ...]:
    """Parse a note's full ``file:`` URI into canonical segments (same rules as workspaces)."""
    return _parse_file_uri(text)


def canonical_workspace(text: str) -> str:
    """Return the one canonical spelling of a workspace URI."""
    return parse_workspace_uri(text).uri


def parse_note_path(text: str) -> tuple[str, ...]:
    """Parse a plain-text relative note path such as ``projects/q3/report.md``.

    Nothing is percent-decoded, so ``%`` is refused to keep paths and URIs unambiguous.
    """
    _check_text(text, "note path")
    if not text:
        raise UriError("empty note path")
    if text.startswith("/"):
        raise UriError("note path must be relative")
    if "\\" in text:
        raise UriError("backslash not allowed")
    if "%" in text:
        raise UriError("percent sign not allowed in note path")
    segments = tuple(text.split("/"))
    _check_segments(segments)
    return segments


def parse_new_note_path(text: str) -> tuple[str, ...]:
    """``parse_note_path`` for a path a client asks to write: each segment must also look like
    no other, so two paths shown side by side in a confirmation form never read the same.

    Refused on top of ``parse_note_path``: leading or trailing whitespace of any Unicode kind,
    space separators other than the ASCII space, and letters that render blank (Hangul fillers,
    the braille blank). Paths stored before this check still parse with ``parse_note_path``.
    """
    segments = parse_note_path(text)
    for segment in segments:
        _check_visible(segment)
    return segments


def _check_visible(segment: str) -> None:
    # Quoted with non-ASCII escaped: the message must show what the segment cannot.
    shown = "'" + segment.encode("ascii", "backslashreplace").decode("ascii") + "'"
    if segment[0].isspace() or segment[-1].isspace():
        raise UriError(f"path segment {shown} starts or ends with whitespace")
    if segment.isascii():
        return
    for ch in segment:
        if unicodedata.category(ch) == "Zs" and ch != " ":
            raise UriError(f"path segment {shown} contains the space U+{ord(ch):04X}")
        if ch in _BLANK_LETTERS:
            raise UriError(f"path segment {shown} contains the blank U+{ord(ch):04X}")


def _parse_file_uri(text: str) -> tuple[str, ...]:
    """Split a ``file:///`` URI into decoded, validated segments."""
    _check_text(text, "URI")
    if text[:5].lower() != "file:":
        raise UriError("scheme must be file")
    rest = text[5:]
    if "?" in rest:
        raise UriError("query not allowed")
    if "#" in rest:
        raise UriError("fragment not allowed")
    if not rest.startswith("///"):
        if rest.startswith("//"):
            raise UriError("host not allowed; use file:///")
        raise UriError("URI must start with file:///")
    path = rest[3:]
    if not path:
        raise UriError("URI has no path")
    if any(ch not in _RAW_PATH_CHARS for ch in path):
        raise UriError("character must be percent-encoded")
    raw_segments = path.split("/")
    if len(raw_segments) > MAX_SEGMENTS:
        raise UriError("too many path segments")
    segments = tuple(_percent_decode(raw) for raw in raw_segments)
    _check_segments(segments)
    return segments


def _check_text(text: object, what: str) -> None:
    """Refuse non-strings and oversized input before doing any work on it."""
    if not isinstance(text, str):
        raise UriError(f"{what} must be a string")
    if len(text) > MAX_URI_LENGTH:
        raise UriError(f"{what} too long")


def _check_length(uri: str) -> str:
    """Keep canonical forms re-parseable: they must fit the raw length limit."""
    if len(uri) > MAX_URI_LENGTH:
        raise UriError("URI too long")
    return uri


def _percent_decode(raw: str) -> str:
    """Decode ``%XX`` escapes once, as strict UTF-8 (rejects overlong forms and surrogates)."""
    buf = bytearray()
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "%":
            buf.extend(ch.encode("ascii"))
            i += 1
            continue
        pair = raw[i + 1 : i + 3]
        if len(pair) != 2 or not all(c in _HEX for c in pair):
            raise UriError("invalid percent-encoding")
        buf.append(int(pair, 16))
        i += 3
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError:
        raise UriError("invalid UTF-8 in percent-encoding") from None


def _check_segments(segments: tuple[str, ...]) -> None:
    """Validate a whole path: non-empty, bounded, every segment safe."""
    if not segments:
        raise UriError("path has no segments")
    if len(segments) > MAX_SEGMENTS:
        raise UriError("too many path segments")
    for segment in segments:
        _check_segment(segment)


def _check_segment(segment: str) -> None:
    """Refuse a decoded segment that could navigate, hide text or mimic a separator."""
    if not isinstance(segment, str):
        raise UriError("path segment must be a string")
    if not segment:
        raise UriError("empty path segment")
    if len(segment) > MAX_SEGMENT_LENGTH:
        raise UriError("path segment too long")
    if segment in (".", ".."):
        raise UriError("dot segment not allowed")
    if "/" in segment or "\\" in segment:
        raise UriError("slash in path segment not allowed")
    if "%" in segment:
        raise UriError("percent sign not allowed (double encoding)")
    if segment.isascii() and segment.isprintable():
        # Fast path, same verdict: printable ASCII has no forbidden category (only Cc occurs
        # in ASCII, and isprintable() is False exactly there), is NFC, has no look-alikes,
        # and NFKC leaves it unchanged, so the checks below cannot fail.
        return
    if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in segment):
        raise UriError("control or invisible character not allowed")
    if not unicodedata.is_normalized("NFC", segment):
        raise UriError("path segment must be NFC-normalized")
    if any(_is_lookalike(ch) for ch in segment):
        raise UriError("look-alike of dot or slash not allowed")
    folded = unicodedata.normalize("NFKC", segment)
    if folded in (".", "..") or "/" in folded or "\\" in folded:
        raise UriError("look-alike of dot or slash not allowed")


def _is_lookalike(ch: str) -> bool:
    """True for a character other than ``.`` that folds to or resembles ``.``, ``/``, ``\\``."""
    if ch == "." or ch.isascii():
        return False
    if ch in _CONFUSABLES:
        return True
    return not _ASCII_LOOKALIKE_TARGETS.isdisjoint(unicodedata.normalize("NFKC", ch))


def _build_uri(segments: tuple[str, ...]) -> str:
    """Percent-encode validated segments into the canonical ``file:///`` form."""
    return _PREFIX + "/".join(_quote(segment) for segment in segments)


def _quote(segment: str) -> str:
    """``quote(segment, safe=_SAFE)``, without the call when every character is left as is."""
    return segment if _UNQUOTED.issuperset(segment) else quote(segment, safe=_SAFE)
