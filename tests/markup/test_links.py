"""Link parsing: every syntax variant, what code hides, and where each target sits."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from notes_server.markup.code import mask_code
from notes_server.markup.links import (
    MARKDOWN,
    WIKI,
    context_at,
    context_of,
    parse_links,
    relative_path,
    resolve_relative,
    rewrite,
    wiki_target_for,
)


def shapes(body: str) -> list[tuple[str, str, str | None, str | None]]:
    return [(link.kind, link.target, link.heading, link.label) for link in parse_links(body)]


def test_wiki_links_in_every_form_are_read_in_order() -> None:
    body = (
        "[[Plan]] then [[projects/q3.md]], [[Plan|the plan]] and [[Plan#Risks|risks]] "
        "[[Plan#Goals]]"
    )

    assert shapes(body) == [
        (WIKI, "Plan", None, None),
        (WIKI, "projects/q3.md", None, None),
        (WIKI, "Plan", None, "the plan"),
        (WIKI, "Plan", "Risks", "risks"),
        (WIKI, "Plan", "Goals", None),
    ]


def test_markdown_links_to_notes_are_read_with_their_fragment_and_decoded() -> None:
    body = 'See [the plan](../plans/q3%20plan.md#Top "title") and [x](notes/a.MD).'

    assert shapes(body) == [
        (MARKDOWN, "../plans/q3 plan.md", "Top", "the plan"),
        (MARKDOWN, "notes/a.MD", None, "x"),
    ]


def test_urls_anchors_images_and_other_files_are_not_note_links() -> None:
    body = (
        "[site](https://example.com/a.md) [mail](mailto:x@y.md) [here](#section) "
        "![img](pic.md) [pdf](doc.pdf) [proto](//host/a.md) [[ ]] [[#Only a heading]]"
    )

    assert parse_links(body) == []


def test_links_inside_code_spans_and_fenced_blocks_are_ignored() -> None:
    body = (
        "`[[Inline]]` and ``a ` [[Double]] `` and [[Real]]\n"
        "```python\n[[Fenced]] [x](f.md)\n```\n"
        "~~~~\n[[Tilde]]\n~~~~\n"
        "after [y](y.md)\n"
    )

    assert [link.target for link in parse_links(body)] == ["Real", "y.md"]


def test_an_unclosed_fence_hides_the_rest_and_an_unmatched_backtick_hides_nothing() -> None:
    assert [link.target for link in parse_links("a ` [[Seen]]")] == ["Seen"]
    assert parse_links("[[Before]]\n```\n[[Never]]\n") != []
    assert [link.target for link in parse_links("[[Before]]\n```\n[[Never]]\n")] == ["Before"]


def test_target_spans_point_at_the_target_text_for_rewriting() -> None:
    body = "x [[ Plan #H|shown]] y [a](dir/b%20c.md#frag) z"
    wiki, markdown = parse_links(body)

    assert body[wiki.target_start : wiki.target_end] == "Plan"
    assert body[markdown.target_start : markdown.target_end] == "dir/b%20c.md"
    assert body[wiki.start : wiki.end] == "[[ Plan #H|shown]]"


def test_relative_targets_resolve_against_the_linking_notes_folder() -> None:
    assert resolve_relative("a/b/note.md", "c.md") == "a/b/c.md"
    assert resolve_relative("a/b/note.md", "../c.md") == "a/c.md"
    assert resolve_relative("a/b/note.md", "./x/../c.md") == "a/b/c.md"
    assert resolve_relative("a/b/note.md", "/top.md") == "top.md"
    assert resolve_relative("note.md", "../escape.md") is None


def test_relative_path_is_the_inverse_of_resolution() -> None:
    assert relative_path("a/b/note.md", "a/c.md") == "../c.md"
    assert relative_path("note.md", "x y/z.md") == "x%20y/z.md"
    assert relative_path("a/n.md", "a/m.md") == "m.md"


segment = st.text(st.sampled_from("abcxyz é-_"), min_size=1, max_size=5).filter(
    lambda s: s.strip() not in ("", ".", "..") and s == s.strip()
)
paths = st.lists(segment, min_size=1, max_size=4).map("/".join)


@given(paths, paths)
def test_a_relative_path_written_for_a_note_resolves_back_to_it(source: str, target: str) -> None:
    from urllib.parse import unquote

    assert resolve_relative(source, unquote(relative_path(source, target))) == target


@given(st.text(max_size=300))
def test_any_text_parses_and_every_span_is_inside_the_body(body: str) -> None:
    masked = mask_code(body)
    assert len(masked) == len(body)
    for link in parse_links(body):
        assert 0 <= link.start <= link.target_start <= link.target_end <= link.end <= len(body)


def test_rewrite_replaces_spans_and_keeps_everything_else() -> None:
    body = "[[Old]] and [[Old|x]]"
    spans = [(link.target_start, link.target_end, "New") for link in parse_links(body)]

    assert rewrite(body, spans) == "[[New]] and [[New|x]]"


def test_a_wiki_target_falls_back_to_the_path_when_the_title_cannot_be_one() -> None:
    assert wiki_target_for("Plan", "plan.md") == "Plan"
    assert wiki_target_for("A|B", "a-b.md") == "a-b.md"
    assert wiki_target_for("C# notes", "c.md") == "c.md"
    assert wiki_target_for("[x]", "[x].md") is None


def test_context_is_one_line_around_the_link() -> None:
    body = "start\n" + "word " * 30 + "[[Target]]" + " tail" * 30
    (link,) = parse_links(body)
    context = context_of(body, link)

    assert "[[Target]]" in context and "\n" not in context
    assert context.startswith("…") and context.endswith("…")


def test_the_context_at_a_position_is_that_of_the_parsed_link_there() -> None:
    rng = random.Random(25)
    pieces = (
        "[[A]]",
        "[[ a |x]]",
        "[[B#H]]",
        "[[ #H]]",
        "[t](c.md)",
        "![i](c.md)",
        "[u](http://x)",
        "[[a]](b.md)",
        "[v](../a.md#S)",
        "`",
        "```\n",
        " ",
        "\n",
        "[[",
        "]]",
        "](",
        "words ",
        "[a `b` c](d.md)",
        "[[a `b` c]]",
        "x" * 70,
    )
    checked = 0
    for _ in range(3000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 16)))
        found = parse_links(body)
        for position in range(-1, len(found) + 1):
            want = context_of(body, found[position])[:400] if 0 <= position < len(found) else ""
            assert context_at(body, position) == want, (body, position)
            checked += 0 <= position < len(found)
    assert checked > 1000
