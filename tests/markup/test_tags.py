"""Tag parsing: what is a tag in a body and in front matter, and what only looks like one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from notes_server.markup.properties import front_matter_tags
from notes_server.markup.tags import body_tags, clean_tag, tag_key


def test_tags_and_nested_tags_are_read_once_each_as_first_written() -> None:
    body = "#Project work on #project/Q3 and #PROJECT again, #urgent.\n#todo-list #a_b"

    assert body_tags(body) == ["Project", "project/Q3", "urgent", "todo-list", "a_b"]


def test_headings_numbers_urls_entities_and_anchors_are_not_tags() -> None:
    body = (
        "# Heading\n## Sub\nissue #123 and #42\nhttps://example.com/page#section\n"
        "&#123; [x](#anchor) a#b mid#word"
    )

    assert body_tags(body) == []


def test_tags_inside_code_are_ignored() -> None:
    body = "`#inline` #real\n```\n#fenced\n```\n"

    assert body_tags(body) == ["real"]


def test_unicode_tags_match_case_insensitively() -> None:
    assert body_tags("#Straße #STRASSE #café") == ["Straße", "café"]
    assert tag_key("Straße") == tag_key("STRASSE")
    assert tag_key("Cafe\u0301") == tag_key("café")


def test_a_trailing_slash_is_trimmed_and_double_slashes_refused() -> None:
    assert body_tags("#a/b/ #c//d") == ["a/b"]
    assert clean_tag("#x") == "x"
    assert clean_tag("12") is None
    assert clean_tag("two words") is None
    assert clean_tag("") is None
    assert clean_tag("x" * 101) is None


def test_front_matter_tags_in_list_flow_and_comma_forms() -> None:
    assert front_matter_tags("tags:\n  - one\n  - '#two'\n  - 3\n") == ["one", "two"]
    assert front_matter_tags("tags: [alpha, Beta, alpha]\n") == ["alpha", "Beta"]
    assert front_matter_tags("tags: x, y/z , w  # a YAML comment\n") == ["x", "y/z", "w"]
    assert front_matter_tags("tags: solo\n") == ["solo"]
    assert front_matter_tags("tags:\n  nested: map\n") == []
    assert front_matter_tags("other: a\n") == []


@given(st.text(max_size=200))
def test_every_body_tag_is_a_clean_tag_without_repeats(body: str) -> None:
    found = body_tags(body)
    assert all(clean_tag(tag) == tag for tag in found)
    assert len({tag_key(tag) for tag in found}) == len(found)
