"""Remembered token checks, valid only while the database has not changed since.

Looking a token up costs a database transaction in a worker thread, most of an HTTP request's
time. A client presents the same token request after request, so its verdict is kept here,
keyed by the token's SHA-256 (never the secret), together with the database's change counter
(`generation`: for SQLite, `PRAGMA data_version`) read *before* the lookup. A remembered
verdict is used only while

- the counter still reads the same: any commit since (a revocation by `notes-server token
  revoke` in another process included) invalidates every entry, so revocation stays immediate;
- the token has not expired by the clock (its `expires_at` is remembered with it);
- it is younger than TTL, so that use keeps being recorded (`last_used_at`) and nothing lives
  on forever.

Only acceptances are remembered; a refused token is looked up each time. Without a counter
(a database that offers none) nothing is remembered: every check reads the database.

Any commit moves the counter, a note written by any client included, so on a busy server a
remembered verdict is often stale. Where the token's row is one local indexed read (embedded
SQLite on the thread's held connection: `recheck_here`), a stale verdict is checked again at
once on the caller's thread (the event loop) with that read, and remembered anew; elsewhere the
caller falls back to `principal_for` in a worker thread. Either way the database is read after
every change, so a revocation is seen by the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from notes_server.security.tokens import TokenVerifier, hash_token, looks_like_token

TTL = timedelta(seconds=30)
MAX_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: str
    expires_at: datetime | None
    generation: int
    fresh_until: datetime


class CachedTokenVerifier:
    """`principal_for` (blocking: may read the database) plus `remembered` (never blocks
    beyond one read of the change counter), for the event loop's fast path."""

    def __init__(
        self,
        verifier: TokenVerifier,
        generation: Callable[[], int | None],
        *,
        ttl: timedelta = TTL,
        max_entries: int = MAX_ENTRIES,
        recheck_here: bool = False,
    ) -> None:
        self.verifier = verifier
        self.generation = generation
        self.ttl = ttl
        self.max_entries = max_entries
        self.recheck_here = recheck_here
        self._entries: dict[str, _Entry] = {}

    def remembered(self, presented: str) -> str | None:
        """The principal of a token accepted since the last database change (or, with
        `recheck_here`, found still active by one read now), or None (look it up with
        `principal_for`)."""
        if not looks_like_token(presented):
            return None
        key = hash_token(presented)
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self.verifier.clock()
        expired = entry.expires_at is not None and entry.expires_at <= now
        if expired or entry.fresh_until <= now:
            self._entries.pop(key, None)
            return None
        generation = self.generation()  # before any re-check: a change during it invalidates
        if generation == entry.generation:
            return entry.principal
        if generation is None or not self.recheck_here:
            return None
        verified = self.verifier.recheck(presented)
        if verified is None or verified.principal != entry.principal:
            self._entries.pop(key, None)
            return None
        self._entries[key] = _Entry(
            verified.principal, verified.expires_at, generation, entry.fresh_until
        )
        return entry.principal

    def principal_for(self, presented: str) -> str | None:
        """The full check (`TokenVerifier.verify`); an acceptance is remembered."""
        generation = self.generation()  # before the lookup: a change during it invalidates
        verified = self.verifier.verify(presented)
        if verified is None:
            return None
        if generation is not None:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            fresh_until = self.verifier.clock() + self.ttl
            self._entries[hash_token(presented)] = _Entry(
                verified.principal, verified.expires_at, generation, fresh_until
            )
        return verified.principal
