"""Front matter properties: read as values, changed key by key, everything else kept."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from notes_server.markup.properties import REMOVE, properties, with_changes

EXTRA = (
    "# a comment\n"
    "status: draft\n"
    "priority: 3\n"
    "done: false\n"
    'quoted: "a: b"\n'
    "aliases:\n  - one\n  - two\n"
    "nested:\n  deep: value\n"
    "tags: [x]\n"
)


def test_readable_keys_become_values_and_the_rest_is_left_out() -> None:
    assert properties(EXTRA) == {
        "status": "draft",
        "priority": 3,
        "done": False,
        "quoted": "a: b",
        "aliases": ["one", "two"],
    }


def test_changes_touch_only_their_keys() -> None:
    changed = with_changes(EXTRA, {"status": "final", "priority": REMOVE, "new": [1, "b c"]})

    assert properties(changed) == {
        "status": "final",
        "done": False,
        "quoted": "a: b",
        "aliases": ["one", "two"],
        "new": [1, "b c"],
    }
    assert "# a comment\n" in changed and "nested:\n  deep: value\n" in changed
    assert "tags: [x]\n" in changed


scalars = st.one_of(
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=30),
    st.integers(-(10**9), 10**9),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
values = st.one_of(scalars, st.lists(scalars, min_size=1, max_size=4))


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), values, max_size=5))
def test_whatever_is_set_reads_back_the_same(changes: dict[str, Any]) -> None:
    changes = {
        k: v for k, v in changes.items() if k not in ("id", "title", "created", "updated", "tags")
    }

    assert properties(with_changes("", changes)) == changes


def test_a_value_with_any_line_break_stays_on_its_line() -> None:
    value = "a\u2028b\x85c\nd\x0be"
    rendered = with_changes("other: 1\n", {"note": value})

    assert len(rendered.splitlines()) == 2
    assert properties(rendered) == {"other": 1, "note": value}
