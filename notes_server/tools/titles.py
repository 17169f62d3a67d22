"""Titles as people see them, and argument refusals that name the field.

A confirmation form is only as good as a person's ability to tell its choices apart, so a title
has one visible spelling: NFC, every run of whitespace (of any Unicode kind) one space, no
leading or trailing whitespace, and no character that renders as nothing (controls, format
characters such as zero-width spaces and bidi controls, surrogates, unassigned code points).
"""

from __future__ import annotations

import unicodedata

from notes_server.errors import InvalidParams

# Categories that render as nothing (or not reliably): never part of a title.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Cn"})


def argument_error(tool: str, field: str, reason: str) -> InvalidParams:
    """-32602 in the same shape as a schema violation, naming the argument."""
    return InvalidParams(f"Invalid arguments for {tool}: arguments.{field} {reason}")


def clean_title(raw: str, tool: str) -> str:
    """The one visible spelling of a title argument; -32602 naming `title` if there is none."""
    collapsed = " ".join(unicodedata.normalize("NFC", raw).split())
    if any(unicodedata.category(ch) in _INVISIBLE for ch in collapsed):
        raise argument_error(
            tool,
            "title",
            "must not contain control or invisible characters (such as zero-width spaces "
            "or bidi controls)",
        )
    if not collapsed:
        raise argument_error(tool, "title", "must contain visible characters")
    return collapsed


def display_title(title: str) -> str:
    """A stored title as a form shows it: spelled as clean_title would, with anything invisible
    (only in rows written before titles were checked) shown as its code point."""
    collapsed = " ".join(unicodedata.normalize("NFC", title).split())
    return "".join(
        f"<U+{ord(ch):04X}>" if unicodedata.category(ch) in _INVISIBLE else ch for ch in collapsed
    )
