"""The keys that seal ``requestState`` tokens: an ordered ring, parsed or kept in a key file.

The first key seals and every key opens, so keys rotate without downtime. Keys come from the
``NOTES_SERVER_STATE_KEYS`` value (passed in by the caller; this module never reads the
environment) or, for the embedded SQLite default, from a 0600 key file beside the database that
every process on that database shares, created race-free. Secrets never appear in reprs, logs
or exception messages.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from notes_server.security import b64url

SECRET_LENGTH = 32
_KID_RE = re.compile(r"[A-Za-z0-9_-]{1,16}")
_MAX_KEY_FILE_BYTES = 64 * 1024
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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
    import secrets  # not at start (a server given its keys never generates one): ~4 ms

    return StateKey(kid=secrets.token_hex(4), secret=secrets.token_bytes(SECRET_LENGTH))


def _format_entry(key: StateKey) -> str:
    return f"{key.kid}:{b64url.encode(key.secret)}"


def _parse_entry(entry: str, index: int) -> StateKey:
    """Parse one ``kid:base64url`` entry; messages name the entry index, never its text."""
    kid, sep, encoded = entry.partition(":")
    if not sep:
        raise ValueError(f"state key entry {index}: expected 'kid:base64url'")
    if not _KID_RE.fullmatch(kid):
        raise ValueError(f"state key entry {index}: key id must match [A-Za-z0-9_-]{{1,16}}")
    try:
        secret = b64url.decode(encoded)
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
    import secrets

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
