"""The authorization server's opaque secrets: codes, access and refresh tokens.

Each is a prefix plus 32 random bytes (base64url), shown once; the database keeps only its
SHA-256, looked up through a primary key (no byte-by-byte comparison of the secret, and a stolen
database yields nothing usable). Like `nst_` tokens, 256 bits leave nothing to a dictionary.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta

ACCESS_PREFIX = "nsa_"
REFRESH_PREFIX = "nsr_"
CODE_PREFIX = "nsc_"
ACCESS_TTL = timedelta(minutes=15)
REFRESH_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=2)
_SHAPE = re.compile(r"ns[arc]_[A-Za-z0-9_-]{43}")


def mint(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def well_formed(secret: object, prefix: str) -> bool:
    """Cheap shape check so garbage never reaches the database."""
    return (
        isinstance(secret, str)
        and secret.startswith(prefix)
        and _SHAPE.fullmatch(secret) is not None
    )
