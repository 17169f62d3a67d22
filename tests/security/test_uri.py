"""Behaviour of the strict workspace/note URI parser (notes_server.security.uri).

Decisions pinned by the tables below:
* the scheme is matched case-insensitively (``FILE:///a`` is accepted) and canonicalised to
  lowercase ``file``; every other part of the canonical form is fixed by re-encoding segments;
* the raw URI must be ASCII: raw spaces, raw non-ASCII letters and other characters outside
  unreserved / sub-delims / ``:@`` / ``/`` / ``%`` are rejected, never silently encoded;
* percent escapes are decoded once; a decoded ``%`` (double encoding) is rejected;
* ``file://localhost/...`` is rejected like any other host, and a trailing slash is an
  empty segment, so it is rejected.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from notes_server.errors import UriError
from notes_server.security.uri import (
    MAX_SEGMENT_LENGTH,
    MAX_SEGMENTS,
    MAX_URI_LENGTH,
    WorkspaceUri,
    canonical_workspace,
    parse_note_path,
    parse_note_uri,
    parse_workspace_uri,
)

REJECT = object()
BASE = "file:///home/alice/notes"

_LONG_OK = "a" * MAX_SEGMENT_LENGTH
_LONG_BAD = "a" * (MAX_SEGMENT_LENGTH + 1)
_MANY_OK = "/".join(["s"] * MAX_SEGMENTS)
_MANY_BAD = "/".join(["s"] * (MAX_SEGMENTS + 1))
# 8 + 7 * 256 + 255 = 2055 > 2048; built from segments that are each individually fine.
_OVER_MAX = "file:///" + "/".join([_LONG_OK] * 8)
# Exactly MAX_URI_LENGTH characters.
_AT_MAX = "file:///" + "/".join([_LONG_OK] * 7 + ["b" * (MAX_URI_LENGTH - 8 - 7 * 256)])

URI_CASES: list[tuple[object, object]] = [
    # --- benign, already canonical ---
    (BASE, BASE),
    ("file:///a", "file:///a"),
    ("file:///home/j%C3%BCrgen/notes", "file:///home/j%C3%BCrgen/notes"),
    ("file:///home/alice/my%20notes", "file:///home/alice/my%20notes"),
    ("file:///home/~alice/notes", "file:///home/~alice/notes"),
    ("file:///a-b_c.d~e", "file:///a-b_c.d~e"),
    ("file:///home/alice/notes-evil", "file:///home/alice/notes-evil"),
    ("file:///home/alice/notes.md", "file:///home/alice/notes.md"),
    ("file:///C:/Users/alice", "file:///C:/Users/alice"),
    ("file:///a/.hidden", "file:///a/.hidden"),
    ("file:///a/...", "file:///a/..."),
    ("file:///a/..b", "file:///a/..b"),
    ("file:///a/b..", "file:///a/b.."),
    ("file:///a/!$&'()*+,;=:@", "file:///a/!$&'()*+,;=:@"),
    ("file:///%E6%97%A5%E6%9C%AC", "file:///%E6%97%A5%E6%9C%AC"),
    ("file:///%C3%A9", "file:///%C3%A9"),  # precomposed e-acute is NFC
    ("file:///%F0%9F%93%9D", "file:///%F0%9F%93%9D"),  # 4-byte emoji
    ("file:///%C2%BD", "file:///%C2%BD"),  # VULGAR FRACTION ONE HALF is not a slash look-alike
    ("file:///%E3%80%82", "file:///%E3%80%82"),  # IDEOGRAPHIC FULL STOP is ordinary text
    ("file:///a/" + _LONG_OK, "file:///a/" + _LONG_OK),
    ("file:///" + _MANY_OK, "file:///" + _MANY_OK),
    (_AT_MAX, _AT_MAX),
    # --- accepted, canonicalised ---
    ("FILE:///a", "file:///a"),
    ("File:///a/B", "file:///a/B"),
    ("file:///j%c3%bcrgen", "file:///j%C3%BCrgen"),
    ("file:///%61%62%63", "file:///abc"),
    ("file:///%7Ealice", "file:///~alice"),
    ("file:///a%2Db", "file:///a-b"),
    ("file:///%2e%2e%2e", "file:///..."),
    ("file:///.%2ehidden", "file:///..hidden"),
    ("file:///%3F", "file:///%3F"),
    ("file:///%23", "file:///%23"),
    ("file:///%3a%40", "file:///:@"),
    ("file:///a%20b%5B%5D", "file:///a%20b%5B%5D"),
    ("file:///%22%3C%3E%60%7B%7D%7C%5E", "file:///%22%3C%3E%60%7B%7D%7C%5E"),
    # --- encoded traversal and dot segments ---
    ("file:///home/alice/notes/%2e%2e/private.md", REJECT),
    ("file:///home/alice/notes/%2E%2E/private.md", REJECT),
    ("file:///home/alice/notes/%2E%2e", REJECT),
    ("file:///home/alice/notes/.%2e/x", REJECT),
    ("file:///home/alice/notes/%2e./x", REJECT),
    ("file:///home/alice/notes/%2e/x", REJECT),
    ("file:///home/alice/notes/../private", REJECT),
    ("file:///home/alice/notes/./x", REJECT),
    ("file:///..", REJECT),
    ("file:///.", REJECT),
    ("file:///a/..", REJECT),
    # --- encoded separators ---
    ("file:///home/alice/notes%2f..%2fbob", REJECT),
    ("file:///a%2Fb", REJECT),
    ("file:///a%5cb", REJECT),
    ("file:///a%5C..%5Cb", REJECT),
    ("file:///a\\b", REJECT),
    # --- double encoding ---
    ("file:///home/alice/notes/%252e%252e/x", REJECT),
    ("file:///a%252fb", REJECT),
    ("file:///a%25", REJECT),
    # --- control, invisible and separator characters ---
    ("file:///a%00b", REJECT),
    ("file:///a%0ab", REJECT),
    ("file:///a%0Db", REJECT),
    ("file:///a%09b", REJECT),
    ("file:///a%7fb", REJECT),
    ("file:///a%C2%85b", REJECT),  # NEL (C1)
    ("file:///a%C2%9Fb", REJECT),  # C1 APC
    ("file:///a%E2%80%AEb", REJECT),  # RIGHT-TO-LEFT OVERRIDE
    ("file:///a%E2%81%A6b", REJECT),  # LEFT-TO-RIGHT ISOLATE
    ("file:///a%E2%80%8Fb", REJECT),  # RIGHT-TO-LEFT MARK
    ("file:///a%E2%80%8Bb", REJECT),  # ZERO WIDTH SPACE
    ("file:///a%E2%80%8Db", REJECT),  # ZERO WIDTH JOINER
    ("file:///a%E2%81%A0b", REJECT),  # WORD JOINER
    ("file:///%EF%BB%BFa", REJECT),  # BOM
    ("file:///a%E2%80%A8b", REJECT),  # LINE SEPARATOR
    ("file:///a%E2%80%A9b", REJECT),  # PARAGRAPH SEPARATOR
    ("file:///a%EF%BF%BF", REJECT),  # noncharacter U+FFFF
    ("file:///a%CD%B8", REJECT),  # unassigned U+0378
    # --- Unicode normalisation and look-alikes ---
    ("file:///e%CC%81", REJECT),  # e + COMBINING ACUTE: not NFC
    ("file:///%EF%BC%8E%EF%BC%8E", REJECT),  # FULLWIDTH FULL STOP x2
    ("file:///a%EF%BC%8Eb", REJECT),
    ("file:///%E2%80%A4%E2%80%A4", REJECT),  # ONE DOT LEADER x2
    ("file:///%E2%80%A5", REJECT),  # TWO DOT LEADER
    ("file:///a%E2%80%A6", REJECT),  # HORIZONTAL ELLIPSIS folds to "..."
    ("file:///%EF%B9%92", REJECT),  # SMALL FULL STOP
    ("file:///a%EF%BC%8Fb", REJECT),  # FULLWIDTH SOLIDUS
    ("file:///a%E2%88%95b", REJECT),  # DIVISION SLASH
    ("file:///a%E2%81%84b", REJECT),  # FRACTION SLASH
    ("file:///a%E2%A7%B8b", REJECT),  # BIG SOLIDUS
    ("file:///a%EF%BC%BCb", REJECT),  # FULLWIDTH REVERSE SOLIDUS
    ("file:///a%EF%B9%A8b", REJECT),  # SMALL REVERSE SOLIDUS
    # --- malformed percent-encoding and UTF-8 ---
    ("file:///a%C3%28", REJECT),
    ("file:///%C0%AE%C0%AE", REJECT),  # overlong "."
    ("file:///%ED%A0%80", REJECT),  # encoded surrogate
    ("file:///%F4%90%80%80", REJECT),  # beyond U+10FFFF
    ("file:///%C3", REJECT),  # truncated sequence
    ("file:///%FF", REJECT),
    ("file:///a%", REJECT),
    ("file:///a%2", REJECT),
    ("file:///a%zz", REJECT),
    ("file:///a%+1", REJECT),
    ("file:///a% 1", REJECT),
    # --- scheme and authority ---
    ("file://host/a", REJECT),
    ("file://localhost/a", REJECT),
    ("file://localhost", REJECT),
    ("file:/a", REJECT),
    ("file:a", REJECT),
    ("file:", REJECT),
    ("file:/", REJECT),
    ("file://", REJECT),
    ("file:///", REJECT),
    ("file:////a", REJECT),
    ("http:///a", REJECT),
    ("http://example.com/a", REJECT),
    ("files:///a", REJECT),
    (" file:///a", REJECT),
    ("/home/alice/notes", REJECT),
    ("", REJECT),
    # --- query and fragment ---
    ("file:///a?x=1", REJECT),
    ("file:///a?", REJECT),
    ("file:///a#frag", REJECT),
    ("file:///a#", REJECT),
    ("file:///a/b?#", REJECT),
    # --- empty segments ---
    ("file:///a//b", REJECT),
    ("file:///a/", REJECT),
    ("file:///a/b/", REJECT),
    # --- raw characters that must be encoded ---
    ("file:///a b", REJECT),
    ("file:///a/b ", REJECT),
    ('file:///a"b', REJECT),
    ("file:///a<b>", REJECT),
    ("file:///a`b", REJECT),
    ("file:///a{b}", REJECT),
    ("file:///a|b", REJECT),
    ("file:///a^b", REJECT),
    ("file:///a[b]", REJECT),
    ("file:///jürgen", REJECT),
    ("file:///a\tb", REJECT),
    ("file:///a\nb", REJECT),
    ("file:///a\x00b", REJECT),
    # --- limits ---
    ("file:///a/" + _LONG_BAD, REJECT),
    ("file:///" + "%C3%A9" * (MAX_SEGMENT_LENGTH + 1), REJECT),
    ("file:///" + _MANY_BAD, REJECT),
    (_OVER_MAX, REJECT),
    (_AT_MAX + "b", REJECT),
    # --- not a string ---
    (None, REJECT),
    (b"file:///a", REJECT),
    (42, REJECT),
    (["file:///a"], REJECT),
]


def _case_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@pytest.mark.parametrize(("text", "expected"), URI_CASES, ids=[_case_id(c[0]) for c in URI_CASES])
def test_workspace_uri_table(text: object, expected: object) -> None:
    if expected is REJECT:
        with pytest.raises(UriError):
            parse_workspace_uri(text)  # type: ignore[arg-type]
        with pytest.raises(UriError):
            parse_note_uri(text)  # type: ignore[arg-type]
        return
    assert isinstance(expected, str)
    workspace = parse_workspace_uri(text)  # type: ignore[arg-type]
    assert workspace.uri == expected
    assert canonical_workspace(text) == expected  # type: ignore[arg-type]
    assert parse_workspace_uri(expected) == workspace
    assert parse_note_uri(text) == workspace.segments  # type: ignore[arg-type]


def test_table_is_large_and_covers_both_outcomes() -> None:
    rejected = sum(1 for _, expected in URI_CASES if expected is REJECT)
    assert len(URI_CASES) >= 90
    assert rejected >= 60
    assert len(URI_CASES) - rejected >= 20


def test_decoded_segments_are_exposed() -> None:
    workspace = parse_workspace_uri("file:///home/j%C3%BCrgen/my%20notes")
    assert workspace.segments == ("home", "jürgen", "my notes")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("file:///a/%2e%2e", "dot segment not allowed"),
        ("file:///a?", "query not allowed"),
        ("file:///a#", "fragment not allowed"),
        ("file://localhost/a", "host not allowed; use file:///"),
        ("http://x/a", "scheme must be file"),
        ("file:///a%252e", "percent sign not allowed (double encoding)"),
        ("file:///a%zz", "invalid percent-encoding"),
        ("file:///a%C0%AE", "invalid UTF-8 in percent-encoding"),
        ("file:///a b", "character must be percent-encoded"),
        ("file:///a//b", "empty path segment"),
        ("file:///a%2fb", "slash in path segment not allowed"),
        ("file:///a%E2%80%AE", "control or invisible character not allowed"),
        ("file:///e%CC%81", "path segment must be NFC-normalized"),
        ("file:///a%EF%BC%8E", "look-alike of dot or slash not allowed"),
        (None, "URI must be a string"),
    ],
)
def test_rejection_reason_is_short_and_specific(text: object, reason: str) -> None:
    with pytest.raises(UriError) as info:
        parse_workspace_uri(text)  # type: ignore[arg-type]
    assert str(info.value) == reason


@pytest.mark.parametrize(
    "text",
    [
        "file:///secret-token-123/%2e%2e",
        "file://secret-token-123/a",
        "file:///secret-token-123?q",
        "file:///secret-token-123/" + "x" * 300,
        "http://secret-token-123/",
    ],
)
def test_rejection_reason_never_echoes_input(text: str) -> None:
    with pytest.raises(UriError) as info:
        parse_workspace_uri(text)
    assert "secret-token-123" not in str(info.value)


def test_uri_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_workspace_uri("file:///a/..")


# --- contains ---------------------------------------------------------------------------

CONTAINS_CASES = [
    (BASE, BASE + "/x.md", True),
    (BASE, BASE + "/sub/x.md", True),
    (BASE, BASE + "/%2e%2e%2e", True),  # "..." is an ordinary name
    (BASE, BASE, False),  # a note is never the workspace itself
    (BASE, "file:///home/alice", False),  # parent
    (BASE, "file:///home/alice/notes-evil", False),  # string-prefix confusion
    (BASE, "file:///home/alice/notes-evil/x.md", False),
    (BASE, "file:///home/alice/notesx/x.md", False),
    (BASE, "file:///home/alice/note/x.md", False),
    (BASE, "file:///home/alice/other/x.md", False),  # sibling
    (BASE, "file:///home/bob/notes/x.md", False),
    (BASE, "file:///x.md", False),
    (BASE, "file:///home/alice/Notes/x.md", False),  # case matters
    (BASE, "file:///home/alice/notes%20/x.md", False),
    ("file:///a", "file:///a/b", True),
    ("file:///a", "file:///ab/c", False),
    ("file:///j%C3%BCrgen", "file:///j%c3%bcrgen/n.md", True),  # hex case is irrelevant
    ("file:///a%20b", "file:///a b/c", None),  # raw space: target itself is rejected
]


@pytest.mark.parametrize(("root", "target", "expected"), CONTAINS_CASES)
def test_contains_table(root: str, target: str, expected: bool | None) -> None:
    workspace = parse_workspace_uri(root)
    if expected is None:
        with pytest.raises(UriError):
            parse_note_uri(target)
        return
    segments = parse_note_uri(target)
    assert workspace.contains(segments) is expected
    assert workspace.contains(WorkspaceUri(segments)) is expected


def test_contains_accepts_plain_tuples_without_parsing() -> None:
    workspace = parse_workspace_uri("file:///a/b")
    assert workspace.contains(("a", "b", "c")) is True
    assert workspace.contains(("a", "b")) is False
    assert workspace.contains(("a",)) is False
    assert workspace.contains(("a", "bc", "d")) is False
    assert workspace.contains(()) is False


# --- note paths -------------------------------------------------------------------------

NOTE_PATH_CASES: list[tuple[object, object]] = [
    ("projects/q3/tps-report.md", ("projects", "q3", "tps-report.md")),
    ("x.md", ("x.md",)),
    ("jürgen/notes.md", ("jürgen", "notes.md")),
    ("my notes/a b.md", ("my notes", "a b.md")),
    (".hidden/x", (".hidden", "x")),
    ("a/.../b", ("a", "...", "b")),
    ("what?/#1.md", ("what?", "#1.md")),
    ("/".join(["s"] * MAX_SEGMENTS), ("s",) * MAX_SEGMENTS),
    (_LONG_OK, (_LONG_OK,)),
    ("", REJECT),
    ("/abs/x.md", REJECT),
    ("a/", REJECT),
    ("a//b", REJECT),
    ("../x.md", REJECT),
    ("a/./b", REJECT),
    ("a/..", REJECT),
    (".", REJECT),
    ("a\\b", REJECT),
    ("..\\x", REJECT),
    ("a%2e%2e", REJECT),
    ("100%.md", REJECT),
    ("a\x00b", REJECT),
    ("a\nb", REJECT),
    ("a\u202eb", REJECT),
    ("a\u200bb", REJECT),
    ("\ufeffa", REJECT),
    ("e\u0301.md", REJECT),
    ("\uff0e\uff0e/x", REJECT),
    ("a\u2215b", REJECT),
    ("a\u2044b", REJECT),
    ("a\ud800b", REJECT),
    (_LONG_BAD, REJECT),
    ("/".join(["s"] * (MAX_SEGMENTS + 1)), REJECT),
    ("a/" * (MAX_URI_LENGTH // 2) + "a", REJECT),
    (None, REJECT),
    (b"x.md", REJECT),
]


@pytest.mark.parametrize(
    ("text", "expected"), NOTE_PATH_CASES, ids=[_case_id(c[0]) for c in NOTE_PATH_CASES]
)
def test_note_path_table(text: object, expected: object) -> None:
    if expected is REJECT:
        with pytest.raises(UriError):
            parse_note_path(text)  # type: ignore[arg-type]
        return
    assert parse_note_path(text) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty note path"),
        ("/abs/x.md", "note path must be relative"),
        ("a\\b", "backslash not allowed"),
        ("100%.md", "percent sign not allowed in note path"),
        ("a/../b", "dot segment not allowed"),
        ("a/", "empty path segment"),
        (None, "note path must be a string"),
    ],
)
def test_note_path_rejection_reason(text: object, reason: str) -> None:
    with pytest.raises(UriError) as info:
        parse_note_path(text)  # type: ignore[arg-type]
    assert str(info.value) == reason


# --- WorkspaceUri construction and note_uri ---------------------------------------------


def test_note_uri_is_canonical_and_reparses() -> None:
    workspace = parse_workspace_uri("file:///home/j%c3%bcrgen")
    uri = workspace.note_uri(("my notes", "ä.md"))
    assert uri == "file:///home/j%C3%BCrgen/my%20notes/%C3%A4.md"
    assert parse_note_uri(uri) == ("home", "jürgen", "my notes", "ä.md")


@pytest.mark.parametrize(
    "path",
    [(), ("..",), ("a", ""), ("a/b",), ("%2e",), ("e\u0301",), ["x.md"]],
)
def test_note_uri_rejects_invalid_paths(path: object) -> None:
    with pytest.raises(UriError):
        parse_workspace_uri(BASE).note_uri(path)  # type: ignore[arg-type]


def test_note_uri_rejects_results_beyond_limits() -> None:
    deep = WorkspaceUri(("s",) * (MAX_SEGMENTS - 1))
    assert parse_note_uri(deep.note_uri(("x",))) == ("s",) * (MAX_SEGMENTS - 1) + ("x",)
    with pytest.raises(UriError):
        deep.note_uri(("x", "y"))
    wide = WorkspaceUri((_LONG_OK,) * 7)
    with pytest.raises(UriError):
        wide.note_uri((_LONG_OK,))


@pytest.mark.parametrize(
    "segments",
    [(), ("..",), ("a", "."), ("",), ("a/b",), ("a%20",), ("\x00",), ["a"], ("a", 1)],
)
def test_workspace_constructor_validates(segments: object) -> None:
    with pytest.raises(UriError):
        WorkspaceUri(segments)  # type: ignore[arg-type]


def test_workspace_is_immutable_and_hashable() -> None:
    workspace = parse_workspace_uri(BASE)
    with pytest.raises(AttributeError):
        workspace.segments = ("x",)  # type: ignore[misc]
    assert {workspace, parse_workspace_uri("FILE:///home/alice/notes")} == {workspace}


# --- properties -------------------------------------------------------------------------

_SEGMENT_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S", "Zs")),
    min_size=1,
    max_size=12,
)
_URI_ALPHABET = "aZ09.-_~%2eEfFcC5/\\:@ ?#é\u202e"


def _quoted_uri(segments: list[str]) -> str:
    return "file:///" + "/".join(quote(s, safe="") for s in segments)


_CANDIDATE_URIS = st.one_of(
    st.lists(_SEGMENT_TEXT, min_size=1, max_size=8).map(_quoted_uri),
    st.text(alphabet=_URI_ALPHABET, max_size=30).map(lambda s: "file:///" + s),
    st.text(max_size=30).map(lambda s: "file:///" + s),
)


def _accepted_workspace(segments: list[str]) -> WorkspaceUri:
    try:
        return WorkspaceUri(tuple(segments))
    except UriError:
        assume(False)
        raise


def _accepted_note_path(segments: list[str]) -> tuple[str, ...]:
    try:
        return parse_note_path("/".join(segments))
    except UriError:
        assume(False)
        raise


def _assert_safe_segment(segment: str) -> None:
    assert segment not in ("", ".", "..")
    assert "/" not in segment and "\\" not in segment and "%" not in segment
    assert unicodedata.is_normalized("NFC", segment)
    assert all(unicodedata.category(ch) not in ("Cc", "Cf") for ch in segment)
    assert 1 <= len(segment) <= MAX_SEGMENT_LENGTH


@given(_CANDIDATE_URIS)
def test_accepted_uris_are_canonical_and_safe(text: str) -> None:
    try:
        workspace = parse_workspace_uri(text)
    except UriError:
        return
    reparsed = parse_workspace_uri(workspace.uri)
    assert reparsed == workspace
    assert reparsed.uri == workspace.uri
    assert workspace.uri.startswith("file:///")
    assert 1 <= len(workspace.segments) <= MAX_SEGMENTS
    for segment in workspace.segments:
        _assert_safe_segment(segment)


@given(st.lists(_SEGMENT_TEXT, min_size=1, max_size=6))
def test_quoted_valid_segments_round_trip(segments: list[str]) -> None:
    workspace = _accepted_workspace(segments)
    assert parse_workspace_uri(_quoted_uri(segments)) == workspace


@given(
    st.lists(_SEGMENT_TEXT, min_size=1, max_size=6),
    st.lists(_SEGMENT_TEXT, min_size=1, max_size=6),
)
def test_note_inside_workspace_round_trips(root: list[str], rel: list[str]) -> None:
    workspace = _accepted_workspace(root)
    path = _accepted_note_path(rel)
    assert workspace.contains(workspace.segments + path)
    assert parse_note_uri(workspace.note_uri(path)) == workspace.segments + path
    assert workspace.note_uri(path).startswith(workspace.uri + "/")


@given(
    st.lists(_SEGMENT_TEXT, min_size=1, max_size=4),
    st.one_of(
        st.text(alphabet=_URI_ALPHABET, max_size=20),
        st.lists(_SEGMENT_TEXT, min_size=1, max_size=3).map(lambda s: _quoted_uri(s)[8:]),
    ),
    st.booleans(),
)
def test_containment_agrees_with_canonical_string_prefix(
    root: list[str], suffix: str, under_root: bool
) -> None:
    workspace = _accepted_workspace(root)
    text = (workspace.uri + "/" if under_root else "file:///") + suffix
    try:
        target = parse_note_uri(text)
    except UriError:
        return
    canonical = WorkspaceUri(target).uri
    assert workspace.contains(target) == canonical.startswith(workspace.uri + "/")
