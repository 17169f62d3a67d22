"""Local account passwords: argon2id (argon2-cffi's defaults, RFC 9106's second profile).

Verification costs tens of milliseconds on purpose; it runs in a worker thread. An unknown
principal is checked against a dummy hash, so a sign-in takes as long whether or not the
account exists and the timing does not say which names are accounts.
"""

from __future__ import annotations

import functools

MIN_LENGTH = 12
MAX_LENGTH = 1024


def password_problem(password: str) -> str | None:
    """Why `password` cannot be set, or None."""
    if len(password) < MIN_LENGTH:
        return f"must be at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters"
    return None


@functools.cache
def _hasher():  # type: ignore[no-untyped-def]
    from argon2 import PasswordHasher

    return PasswordHasher()


def hash_password(password: str) -> str:
    return str(_hasher().hash(password))


@functools.cache
def _dummy() -> str:
    return hash_password("not a password of any account")


def verify_password(stored: str | None, password: str) -> bool:
    """True when `password` matches `stored`; with no stored hash, spend the same time and
    answer False."""
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    if len(password) > MAX_LENGTH:
        return False
    try:
        return bool(_hasher().verify(stored or _dummy(), password)) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
