"""Opaque API tokens: minting, hashing, and resolving a presented token to its principal.

A token is `nst_` + 32 random bytes (base64url). It is shown once at creation; the database
keeps only its SHA-256. Lookup is by that hash through a unique index, so comparing a presented
token never touches the secret byte by byte (no timing side channel), and a stolen database
yields no usable token. SHA-256 without a salt is right here: the input has 256 bits of entropy,
so there is nothing for a dictionary attack to find.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from notes_server.errors import DatabaseFault
from notes_server.security.principals import SEPARATOR

PREFIX = "nst_"
SECRET_BYTES = 32
_SHAPE = re.compile(r"nst_[A-Za-z0-9_-]{43}")

log = logging.getLogger("notes_server.auth")


class StoredToken(Protocol):
    """What verification needs of a stored token."""

    @property
    def id(self) -> int: ...

    @property
    def principal(self) -> str: ...

    @property
    def expires_at(self) -> datetime | None: ...

    @property
    def last_used_at(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class Verified:
    """An accepted token: who it acts as, and until when (None: no expiry)."""

    principal: str
    expires_at: datetime | None


class TokenRecords(Protocol):
    """Where tokens are kept (the store implements it: `store.tokens.SqlTokenRecords`); this
    module decides what a token is and when it is valid, never how rows are read."""

    def create(
        self,
        *,
        principal: str,
        name: str | None,
        token_hash: str,
        now: datetime,
        expires_at: datetime | None,
    ) -> int: ...

    def find_active(self, token_hash: str, now: datetime) -> StoredToken | None: ...

    def touch_if_due(self, token_id: int, last_used_at: datetime | None, now: datetime) -> None:
        """Record the token's use, unless it was recorded recently; DatabaseFault when the
        database cannot record it (the store classifies the driver's error)."""


def utc_now() -> datetime:
    """Aware UTC, the form the store's timestamp columns take and return."""
    return datetime.now(UTC)


def mint() -> str:
    return PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def looks_like_token(value: str) -> bool:
    """Cheap shape check so garbage never reaches the database."""
    return _SHAPE.fullmatch(value) is not None


def create_token(
    records: TokenRecords,
    principal: str,
    *,
    name: str | None = None,
    expires_in: timedelta | None = None,
    now: datetime | None = None,
) -> tuple[int, str]:
    """Store a new token for `principal`; returns (id, secret). The secret is not kept."""
    now = now or utc_now()
    secret = mint()
    token_id = records.create(
        principal=principal,
        name=name,
        token_hash=hash_token(secret),
        now=now,
        expires_at=None if expires_in is None else now + expires_in,
    )
    return token_id, secret


class TokenVerifier:
    """Resolves `Authorization: Bearer nst_...` to a principal, one request at a time."""

    def __init__(self, records: TokenRecords, clock: Callable[[], datetime] = utc_now) -> None:
        self.records = records
        self.clock = clock
        self._touch_failed = False

    def principal_for(self, presented: str) -> str | None:
        """The principal of an active token, or None (unknown, revoked or expired)."""
        verified = self.verify(presented)
        return None if verified is None else verified.principal

    def verify(self, presented: str) -> Verified | None:
        """An active token's principal and expiry, or None (unknown, revoked or expired)."""
        now = self.clock()
        found = self._active(presented, now)
        if found is None:
            return None
        self._record_use(found, now)
        return Verified(found.principal, found.expires_at)

    def recheck(self, presented: str) -> Verified | None:
        """`verify` without recording the use (one read, no write): for a token accepted
        before, checked again because the database changed since."""
        found = self._active(presented, self.clock())
        return None if found is None else Verified(found.principal, found.expires_at)

    def _active(self, presented: str, now: datetime) -> StoredToken | None:
        if not looks_like_token(presented):
            return None
        found = self.records.find_active(hash_token(presented), now)
        if found is None:
            log.info("bearer token rejected: unknown, revoked or expired")
            return None
        if SEPARATOR in found.principal:
            # Created before names were checked: it must not pass for a JWT user (ISSUER|SUB).
            log.warning("bearer token %d rejected: its principal contains %r", found.id, SEPARATOR)
            return None
        return found

    def _record_use(self, token: StoredToken, now: datetime) -> None:
        """Refresh `last_used_at`, best effort: a database that cannot be written (full disk,
        read-only) must not lock every client out of reading. Warns once per process."""
        try:
            self.records.touch_if_due(token.id, token.last_used_at, now)
        except DatabaseFault as fault:
            if not self._touch_failed:
                self._touch_failed = True
                log.warning("cannot record token use (%s); requests go on", fault.cause)
