"""`same_links_and_tags`: an edit judged away from every link and tag must parse the same."""

from __future__ import annotations

import random

from notes_server.markup.stable import common_head, common_tail, same_links_and_tags
from notes_server.markup.tags import body_tags
from notes_server.store.content_index import link_rows

PIECES = [
    "word ",
    "other words here ",
    "\n",
    "\n\n",
    "   ",
    "[[Target]] ",
    "[[Plan#Q3|the plan]] ",
    "[notes](sub/notes.md) ",
    '[t](a.md\n  "title") ',
    '[t](b.md\n\n   \n"title") ',
    "[t](c.md\n\n",
    "\n  \n",
    "## Section 2\n",
    "x#y ",
    "![img](pic.md) ",
    "#tag ",
    "#nested/tag ",
    "# Heading\n",
    "`code [[Inside]]` ",
    "```\n[[Fenced]] #fenced\n```\n",
    "~~~\n#t\n~~~\n",
    "`",
    "[",
    "]",
    "(",
    ")",
    '"',
    "#",
    "x" * 70,
]
FILLER = ["word ", "other words here ", "line of text\n", "x" * 70]
EDITS = ["", "a", "more text", " ", "\n", "[", "]]", "#", "`", "(", '"', "x" * 80, "line\n"]


def parsed(body: str) -> tuple[object, object]:
    return link_rows.__wrapped__(body, "dir/note.md"), body_tags(body)


def test_common_head_and_tail_are_the_longest_shared_ends() -> None:
    rng = random.Random(1)
    for _ in range(500):
        a = "".join(rng.choice("ab\n") for _ in range(rng.randrange(12)))
        b = "".join(rng.choice("ab\n") for _ in range(rng.randrange(12)))
        head = common_head(a, b)
        tail = common_tail(a, b, min(len(a), len(b)) - head)
        assert a[:head] == b[:head]
        assert head == min(len(a), len(b)) or a[head] != b[head]
        assert tail == 0 or a[-tail:] == b[-tail:]
        assert head + tail <= min(len(a), len(b))


def test_an_edit_judged_away_from_links_and_tags_parses_the_same() -> None:
    rng = random.Random(22)
    judged_same = changed = 0
    for _ in range(6000):
        old = "".join(
            rng.choice(PIECES if rng.random() < 0.3 else FILLER)
            for _ in range(rng.randrange(1, 40))
        )
        at = rng.randrange(len(old) + 1)
        cut = min(len(old), at + rng.choice([0, 0, 1, 3, 20]))
        new = old[:at] + rng.choice(EDITS) + old[cut:]
        if same_links_and_tags(old, new):
            judged_same += 1
            assert parsed(old) == parsed(new), (old, new)
        elif parsed(old) != parsed(new):
            changed += 1
    # Both answers occur often enough for the check to mean something.
    assert judged_same > 400 and changed > 400, (judged_same, changed)


def test_edits_near_or_on_link_and_tag_syntax_are_not_judged_the_same() -> None:
    body = "Intro line.\nSee [[Target]] here.\nTagged #tag\n" + "filler text. " * 20 + "\nEnd."
    assert same_links_and_tags(body, body.replace("End.", "The end."))
    assert not same_links_and_tags(body, body.replace("Target", "Targets"))
    assert not same_links_and_tags(body, body.replace("here.", "there."))  # in the context
    assert not same_links_and_tags(body, body.replace("Tagged", "Tagging"))  # a tag's line
    assert not same_links_and_tags(body, body.replace("Intro line.\n", "Intro line.\n\n"))


def test_a_blank_line_after_a_link_destination_is_part_of_the_link() -> None:
    # Destination and gap longer than the context margin: only the blank line tells.
    body = "See [t](" + "d" * 70 + ".md\n\n" + " " * 70 + '"title") end.\n' + "filler. " * 10
    filled = body.replace(".md\n\n", ".md\nx\n")
    assert parsed(body) != parsed(filled)  # the link is gone
    assert not same_links_and_tags(body, filled)


def test_appending_to_a_section_under_headings_is_judged_the_same() -> None:
    body = "## Section 1\nwords and words\n\n## Section 2\nmore words\n"
    appended = body.replace("words and words\n", "words and words\nline 5\n")
    assert same_links_and_tags(body, appended)
    assert parsed(body) == parsed(appended)
