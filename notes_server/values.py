"""Checks on decoded JSON values that no transport may skip: nesting depth, lone surrogates,
and strictly ASCII numerals. Pure and iterative, so a hostile value cannot exhaust the stack.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# Far beyond any real MCP message (a form schema inside `inputRequests` is about 8 deep), and
# far below what `copy.deepcopy`, `json` or `repr` can recurse through.
MAX_DEPTH = 64
MAX_KEY_ECHO = 64

# `json.loads` joins a valid `\uD83D\uDE00` pair into one code point, so any code point left in
# this range came from an unpaired escape: it has no UTF-8 form and cannot be stored or sent.
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_DIGITS = re.compile("[0-9]+")


def nests_deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether objects and arrays in `value` nest more than `limit` levels (top level is 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def larger_than(value: Any, limit: int) -> bool:
    """Whether `value` would take more than about `limit` bytes as JSON (strings and member
    names by length, other values a few bytes each). Iterative, and it stops as soon as the
    limit is passed, so a huge value costs no more than a small one."""
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 3
        elif isinstance(item, dict):
            size += 2
            for key, child in item.items():
                size += len(key) + 4
                stack.append(child)
        elif isinstance(item, list):
            size += 2 + len(item)
            stack.extend(item)
        else:
            size += 8
        if size > limit:
            return True
    return False


def has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def surrogate_problem(value: Any, where: str) -> str | None:
    """One sentence naming the first string (or member name) at or below `where` that holds a
    lone surrogate, or None. Names are echoed short and never with the surrogate itself.

    The check is orjson's encoder, which refuses a lone surrogate in any string or member name
    (in C, in one pass); only a value it refuses, for that or any other reason (an integer
    beyond 64 bits, nesting past its limit), is walked here, to name the field or to find none.
    The walk alone had cost ~6% of a stdio `notes_read`'s instructions (every tool call's
    arguments pass here)."""
    try:
        orjson.dumps(value)
    except TypeError:
        pass
    else:
        return None
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if has_surrogate(item):
                return f"{path} contains an unpaired surrogate"
        elif isinstance(item, dict):
            if any(has_surrogate(key) for key in item):
                return f"{path} has a member name with an unpaired surrogate"
            children = [(v, _member(path, k)) for k, v in item.items()]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(v, f"{path}[{i}]") for i, v in enumerate(item)]))
    return None


def _member(path: str, key: str) -> str:
    key = key if len(key) <= MAX_KEY_ECHO else key[:MAX_KEY_ECHO] + "..."
    return f"{path}.{key}" if path else key


def is_ascii_digits(text: str) -> bool:
    """`str.isdigit` also accepts '²' and '٣', which `int` then refuses or reads differently."""
    return _ASCII_DIGITS.fullmatch(text) is not None
