"""Strict unpadded base64url, as the state tokens and the key ring spell their bytes."""

from __future__ import annotations

import base64
import binascii
import re

_ALPHABET_RE = re.compile(r"[A-Za-z0-9_-]*")


def encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode(text: str) -> bytes:
    """Strict unpadded base64url: one canonical spelling per byte string.

    ``base64.urlsafe_b64decode`` silently drops foreign characters and ignores the unused low
    bits of the last character, which would let distinct strings open to the same bytes.
    """
    if not _ALPHABET_RE.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not canonical base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not canonical base64url") from None
    if encode(data) != text:
        raise ValueError("not canonical base64url")
    return data
