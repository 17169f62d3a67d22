"""Sealed, opaque ``requestState`` tokens for two-round destructive tools.

Round 1 of a destructive tool hands the client a ``requestState`` that it must echo back in
round 2. The server is stateless, so everything it needs to trust in round 2 travels inside the
token; it must therefore be confidential and tamper-proof. We use AES-256-GCM:

    token = "v1." + kid + "." + base64url_nopad(nonce[12] + ciphertext + tag[16])
    AAD   = b"notes-server/state/v1|" + kid

The AAD binds the version and key id, so relabelling a token with another kid fails even if two
keys happened to share a secret. Keys rotate through a ``KeyRing`` (``security/keyring.py``):
the first key seals, every key opens.

Failures to open raise ``StateError`` whose ``reason`` is for logs only; the caller maps it to
one fixed wire message. Secrets never appear in reprs, logs or exception messages.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from notes_server.errors import NotesServerError
from notes_server.security import b64url
from notes_server.security.keyring import KeyRing

__all__ = ["MAX_STATE_LENGTH", "StateError", "StateSealer"]

VERSION = "v1"
MAX_STATE_LENGTH = 4096
MAX_IAT_SKEW_SECONDS = 60
NONCE_LENGTH = 12
TAG_LENGTH = 16
_AAD_PREFIX = b"notes-server/state/" + VERSION.encode("ascii") + b"|"


class StateError(NotesServerError):
    """Why a state failed to open; the reason is for logs only, never for the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _aad(kid: str) -> bytes:
    return _AAD_PREFIX + kid.encode("ascii")


class StateSealer:
    """Seals claims into ``requestState`` tokens and opens them again, checking expiry."""

    def __init__(self, ring: KeyRing, *, clock: Callable[[], float] = time.time) -> None:
        self._ring = ring
        self._clock = clock
        self._ciphers = {key.kid: AESGCM(key.secret) for key in ring.keys}

    def seal(self, claims: Mapping[str, Any], ttl_seconds: float) -> str:
        """Seal ``claims`` plus ``iat``/``exp`` under the ring's sealing key."""
        if "iat" in claims or "exp" in claims:
            raise ValueError("claims must not contain 'iat' or 'exp'; the sealer sets them")
        if not all(isinstance(name, str) for name in claims):
            raise TypeError("claim names must be strings")
        if isinstance(ttl_seconds, bool) or not (0 < ttl_seconds < math.inf):
            raise ValueError("ttl_seconds must be a positive finite number")
        iat = math.floor(self._clock())
        payload = {**claims, "iat": iat, "exp": math.ceil(iat + ttl_seconds)}
        plaintext = json.dumps(
            payload, separators=(",", ":"), sort_keys=True, allow_nan=False
        ).encode("utf-8")
        key = self._ring.sealing_key
        nonce = os.urandom(NONCE_LENGTH)
        sealed = nonce + self._ciphers[key.kid].encrypt(nonce, plaintext, _aad(key.kid))
        token = f"{VERSION}.{key.kid}.{b64url.encode(sealed)}"
        if len(token) > MAX_STATE_LENGTH:
            raise ValueError("claims too large: the sealed state would exceed MAX_STATE_LENGTH")
        return token

    def open(self, token: str) -> dict[str, Any]:
        """Verify and decrypt a token; return all claims including ``iat`` and ``exp``."""
        kid, sealed = self._parse(token)
        nonce, ciphertext = sealed[:NONCE_LENGTH], sealed[NONCE_LENGTH:]
        try:
            plaintext = self._ciphers[kid].decrypt(nonce, ciphertext, _aad(kid))
        except InvalidTag:
            raise StateError("authentication failed") from None
        try:
            payload = json.loads(plaintext.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise StateError("payload is not JSON") from None
        if not isinstance(payload, dict):
            raise StateError("payload is not a JSON object")
        self._check_times(payload)
        return payload

    def _parse(self, token: object) -> tuple[str, bytes]:
        """Split and decode the envelope; every structural defect becomes a StateError."""
        if not isinstance(token, str):
            raise StateError("state is not a string")
        if len(token) > MAX_STATE_LENGTH:
            raise StateError("state is too long")
        parts = token.split(".")
        if len(parts) != 3:
            raise StateError("state is malformed")
        version, kid, body = parts
        if version != VERSION:
            raise StateError("unsupported state version")
        if kid not in self._ciphers:
            raise StateError("unknown key id")
        try:
            sealed = b64url.decode(body)
        except ValueError:
            raise StateError("bad base64url") from None
        if len(sealed) < NONCE_LENGTH + TAG_LENGTH:
            raise StateError("state is too short")
        return kid, sealed

    def _check_times(self, payload: Mapping[str, Any]) -> None:
        exp = payload.get("exp")
        iat = payload.get("iat")
        if type(exp) is not int:
            raise StateError("missing or non-integer exp")
        if type(iat) is not int:
            raise StateError("missing or non-integer iat")
        now = self._clock()
        if now >= exp:
            raise StateError("expired")
        if iat > now + MAX_IAT_SKEW_SECONDS:
            raise StateError("issued in the future")
