"""The markdown outline: which lines are headings, each section's extent, and the addresses
(with `#n` for repeated sibling headings) that select them."""

from __future__ import annotations

import pytest

from notes_server.tools.outline import BadAddress, canonical, find_section, line_of, outline

DOC = (
    "# Plan\n"
    "intro\n"
    "## Risks ##\n"
    "first risks\n"
    "```\n"
    "# not a heading (fenced)\n"
    "```\n"
    "## Risks\n"
    "second risks\n"
    "### A/B #x\n"
    "deep\n"
    "# Other\n"
    "    # indented: code, not a heading\n"
    "#nospace is a tag, not a heading\n"
    "~~~~ python\n"
    "## fenced with tildes\n"
    "~~~\n"
    "still fenced: a closing fence is at least as long\n"
    "~~~~\n"
    "## Last\n"
    "end"
)


def sections(body: str) -> list[tuple[int, str, str, str]]:
    return [(h.level, h.text, h.address, body[h.offset : h.end]) for h in outline(body)]


def test_the_outline_lists_atx_headings_outside_fenced_code_with_their_sections() -> None:
    assert sections(DOC) == [
        (1, "Plan", "Plan", DOC[: DOC.index("# Other")]),
        (
            2,
            "Risks",
            "Plan/Risks",
            "## Risks ##\nfirst risks\n```\n# not a heading (fenced)\n```\n",
        ),
        (2, "Risks", "Plan/Risks#2", "## Risks\nsecond risks\n### A/B #x\ndeep\n"),
        (3, "A/B #x", "Plan/Risks#2/A\\/B \\#x", "### A/B #x\ndeep\n"),
        (1, "Other", "Other", DOC[DOC.index("# Other") :]),
        (2, "Last", "Other/Last", "## Last\nend"),
    ]


def test_offsets_and_lengths_are_character_positions_in_the_body() -> None:
    body = "é\n# Ünïcode\ntext\n"
    [heading] = outline(body)

    assert (heading.offset, heading.length, heading.content_offset) == (2, 15, 12)
    assert heading.as_json() == {
        "level": 1,
        "text": "Ünïcode",
        "offset": 2,
        "length": 15,
        "address": "Ünïcode",
    }


def test_a_body_without_headings_has_an_empty_outline() -> None:
    assert outline("") == []
    assert outline("plain #tag text\n```\n# fenced\n```") == []


def test_an_unclosed_fence_runs_to_the_end_of_the_note() -> None:
    assert sections("# Top\n```\n# inside\n") == [(1, "Top", "Top", "# Top\n```\n# inside\n")]


def test_a_backtick_line_with_backticks_after_it_opens_no_fence() -> None:
    body = "``` not `a fence`\n# Real\n"
    assert [h.text for h in outline(body)] == ["Real"]


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("Plan/Risks", "Plan/Risks"),
        ("Plan/Risks#1", "Plan/Risks"),
        ("Plan/Risks#2", "Plan/Risks#2"),
        ("Plan / Risks#2", "Plan/Risks#2"),
        ("Plan/Risks#2/A\\/B \\#x", "Plan/Risks#2/A\\/B \\#x"),
        ("Other/Last", "Other/Last"),
    ],
)
def test_an_address_selects_one_heading_by_path_and_sibling_number(
    address: str, expected: str
) -> None:
    found = find_section(outline(DOC), address)

    assert found is not None
    assert found.address == expected


@pytest.mark.parametrize("address", ["Risks", "Plan/Risks#3", "Plan/Last", "plan/risks"])
def test_an_address_that_names_no_heading_selects_nothing(address: str) -> None:
    assert find_section(outline(DOC), address) is None


@pytest.mark.parametrize("address", ["Plan//Risks", "/Plan", "Plan/Risks#0", "Plan/Risks#x"])
def test_an_unreadable_address_is_refused(address: str) -> None:
    with pytest.raises(BadAddress):
        canonical(address)


def test_line_numbers_are_one_based() -> None:
    assert [line_of("a\nb\nc", at) for at in (0, 2, 4)] == [1, 2, 3]
