"""Sealed, opaque ``requestState`` tokens for two-round destructive tools.

Round 1 of a destructive tool hands the client a ``requestState`` that it must echo back in
round 2. The server is stateless, so everything it needs to trust in round 2 travels inside the
token; it must therefore be confidential and tamper-proof. We use AES-256-GCM:

    token = "v1." + kid + "." + base64url_nopad(nonce[12] + ciphertext + tag[16])
    AAD   = b"notes-server/state/v1|" + kid

The AAD binds the version and key id, so relabelling a token with another kid fails even if two
keys happened to share a secret. Keys rotate through a ``KeyRing``: the first key seals, every
key opens. Keys come from the ``NOTES_SERVER_STATE_KEYS`` value (passed in by the caller; this
module never reads the environment) or, for the embedded SQLite default, from a 0600 key file
beside the database that every process on that database shares.

Failures to open raise ``StateError`` whose ``reason`` is for logs only; the caller maps it to
one fixed wire message. Secrets never appear in reprs, logs or exception messages.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from notes_server.errors import NotesServerError

__all__ = [
    "MAX_STATE_LENGTH",
    "KeyRing",
    "StateError",
    "StateKey",
    "StateSealer",
]

VERSION = "v1"
MAX_STATE_LENGTH = 4096
MAX_IAT_SKEW_SECONDS = 60
SECRET_LENGTH = 32
NONCE_LENGTH = 12
TAG_LENGTH = 16
_AAD_PREFIX = b"notes-server/state/" + VERSION.encode("ascii") + b"|"
_KID_RE = re.compile(r"[A-Za-z0-9_-]{1,16}")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_MAX_KEY_FILE_BYTES = 64 * 1024
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class StateError(NotesServerError):
    """Why a state failed to open; the reason is for logs only, never for the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url: one canonical spelling per byte string.

    ``base64.urlsafe_b64decode`` silently drops foreign characters and ignores the unused low
    bits of the last character, which would let distinct strings open to the same bytes.
    """
    if not _B64URL_RE.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not canonical base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not canonical base64url") from None
    if _b64url_encode(data) != text:
        raise ValueError("not canonical base64url")
    return data


@dataclass(frozen=True, repr=False)
class StateKey:
    """One AES-256-GCM key and the short id that names it inside tokens."""

    kid: str
    secret: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.kid, str) or not _KID_RE.fullmatch(self.kid):
            raise ValueError("state key id must match [A-Za-z0-9_-]{1,16}")
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_LENGTH:
            raise ValueError(f"state key secret must be exactly {SECRET_LENGTH} bytes")

    def __repr__(self) -> str:
        return f"StateKey(kid={self.kid!r}, secret=<redacted>)"


def _generate_key() -> StateKey:
    """A fresh random key; the kid is a random short id so independent hosts rarely collide."""
    return StateKey(kid=secrets.token_hex(4), secret=secrets.token_bytes(SECRET_LENGTH))


def _format_entry(key: StateKey) -> str:
    return f"{key.kid}:{_b64url_encode(key.secret)}"


def _parse_entry(entry: str, index: int) -> StateKey:
    """Parse one ``kid:base64url`` entry; messages name the entry index, never its text."""
    kid, sep, encoded = entry.partition(":")
    if not sep:
        raise ValueError(f"state key entry {index}: expected 'kid:base64url'")
    if not _KID_RE.fullmatch(kid):
        raise ValueError(f"state key entry {index}: key id must match [A-Za-z0-9_-]{{1,16}}")
    try:
        secret = _b64url_decode(encoded)
    except ValueError:
        raise ValueError(f"state key entry {index}: secret is not unpadded base64url") from None
    if len(secret) != SECRET_LENGTH:
        raise ValueError(f"state key entry {index}: secret must decode to {SECRET_LENGTH} bytes")
    return StateKey(kid=kid, secret=secret)


class KeyRing:
    """Ordered keys: the first seals, all of them open, so keys can rotate without downtime."""

    def __init__(self, keys: Sequence[StateKey]) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one state key")
        by_kid: dict[str, StateKey] = {}
        for key in keys:
            if not isinstance(key, StateKey):
                raise TypeError("key ring entries must be StateKey instances")
            if key.kid in by_kid:
                raise ValueError(f"duplicate state key id {key.kid!r}")
            by_kid[key.kid] = key
        self._keys = tuple(keys)
        self._by_kid = by_kid

    def __repr__(self) -> str:
        return f"KeyRing(kids={[key.kid for key in self._keys]!r})"

    @property
    def sealing_key(self) -> StateKey:
        """The key new tokens are sealed with (the first one configured)."""
        return self._keys[0]

    @property
    def keys(self) -> tuple[StateKey, ...]:
        return self._keys

    def get(self, kid: str) -> StateKey | None:
        return self._by_kid.get(kid)

    @classmethod
    def parse(cls, spec: str) -> KeyRing:
        """Parse ``"kid:base64url,kid:base64url"`` (the ``NOTES_SERVER_STATE_KEYS`` format)."""
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError("state key spec is empty")
        keys = [_parse_entry(entry.strip(), i) for i, entry in enumerate(spec.split(","), 1)]
        return cls(keys)

    @staticmethod
    def generate_spec() -> str:
        """A fresh ``kid:base64url`` entry, for operators generating a key."""
        return _format_entry(_generate_key())

    @classmethod
    def load_or_create_file(cls, path: Path) -> KeyRing:
        """Read the shared key file, creating it once (race-free across processes) if missing.

        The new file is written and fsynced under a unique temp name, then hard-linked into
        place: ``link`` never overwrites, so exactly one process wins and every other one reads
        the winner's complete file, never a half-written one.
        """
        path = Path(path)
        try:
            return cls._read_key_file(path)
        except FileNotFoundError:
            pass
        _ensure_private_dir(path.parent)
        content = (cls.generate_spec() + "\n").encode("ascii")
        temp = _write_private_temp(path, content)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another process won the race; its key is the shared one
        finally:
            _unlink_if_present(temp)
        _fsync_dir(path.parent)
        return cls._read_key_file(path)

    @classmethod
    def _read_key_file(cls, path: Path) -> KeyRing:
        """Read a key file, failing closed unless it is a regular owner-only file."""
        fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"state key file {path} is not a regular file")
            if st.st_mode & 0o077:
                mode = oct(stat.S_IMODE(st.st_mode))
                raise ValueError(f"state key file {path} has mode {mode}; it must be 0o600")
            raw = handle.read(_MAX_KEY_FILE_BYTES + 1)
        if len(raw) > _MAX_KEY_FILE_BYTES:
            raise ValueError(f"state key file {path} is too large")
        try:
            return cls.parse(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            detail = str(exc) if isinstance(exc, ValueError) else "not ASCII"
            raise ValueError(f"state key file {path} is invalid: {detail}") from None


def _ensure_private_dir(directory: Path) -> None:
    """Create the key file's directory owner-only if missing; leave an existing one alone."""
    try:
        directory.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        return
    os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask


def _write_private_temp(path: Path, content: bytes) -> Path:
    """Write ``content`` durably to a fresh 0600 file beside ``path`` and return its name."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | _O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # the umask might have removed owner bits
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink_if_present(temp)
        raise
    return temp


def _unlink_if_present(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _fsync_dir(directory: Path) -> None:
    """Persist the new directory entry; best effort (some platforms cannot open directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY | _O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
        token = f"{VERSION}.{key.kid}.{_b64url_encode(sealed)}"
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
            sealed = _b64url_decode(body)
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
