"""The database side of 2025-11-25 HTTP sessions, as the transport uses it: a session's row
(opened with a random id whose SHA-256 is the key), its roots, and the questions awaiting the
client's answers, with the clock applied."""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from notes_server.compat_2025.roots import ROOTS_WAIT_S, GrantLookup, Roots, dump_roots, load_roots
from notes_server.compat_2025.session import LegacySession
from notes_server.store.sessions import QuestionState, SessionRecord, SqlLegacySessions

SESSION_TTL = timedelta(hours=24)
# How often each HTTP worker deletes expired sessions and questions (not only when a session
# opens: a principal that stops opening sessions would otherwise leave its rows behind).
SWEEP_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class LegacyHttpOptions:
    """What the composition root provides: the repository (built on first use), the clock,
    how long to wait for a user's answer (the confirmation state's lifetime) and for a
    client's `roots/list` answer (never longer than for a user's)."""

    repository: Callable[[], SqlLegacySessions]
    clock: Callable[[], datetime]
    answer_wait_s: float
    grants: GrantLookup | None = None
    roots_wait_s: float = ROOTS_WAIT_S
    sweep_every_s: float = SWEEP_EVERY_S


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()


# The stored texts are parsed once, not on every request of a session: many sessions share
# the same capabilities (one client program), and what is stored is bounded (`start_session`).
# The values are shared, so nothing may change them (`modern_params` copies what it stamps).
@functools.lru_cache(maxsize=512)
def _negotiated(
    capabilities_json: str, client_info_json: str | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    info = None if client_info_json is None else json.loads(client_info_json)
    return json.loads(capabilities_json), info


@functools.lru_cache(maxsize=512)
def _roots(roots_json: str | None) -> tuple[bool, Roots | None]:
    return load_roots(roots_json)


class SessionStore:
    """The repository calls the transport makes, with the clock applied."""

    def __init__(self, options: LegacyHttpOptions) -> None:
        self.options = options

    @property
    def repo(self) -> SqlLegacySessions:
        return self.options.repository()

    def open(self, principal: str, session: LegacySession) -> str:
        session_id = secrets.token_urlsafe(32)
        now = self.options.clock()
        info = None if session.client_info is None else json.dumps(session.client_info)
        record = SessionRecord(
            principal, session.version, json.dumps(session.capabilities), info, now + SESSION_TTL
        )
        self.repo.create(session_hash(session_id), record, now)
        return session_id

    @property
    def runs_on_loop(self) -> bool:
        """Whether `lookup` and `poll` may run on the event loop (`runs_on_loop`)."""
        return self.repo.runs_on_loop

    def lookup(self, key: str, principal: str) -> tuple[LegacySession, bool] | None:
        """The principal's live session, and whether its expiry is due to move forward
        (`refresh`, a write: never on the event loop)."""
        now = self.options.clock()
        repo = self.repo
        record = repo.lookup(key, principal, now)
        if record is None:
            return None
        capabilities, info = _negotiated(record.capabilities_json, record.client_info_json)
        known, roots = _roots(record.roots_json)
        session = LegacySession(
            record.version,
            capabilities,
            info,
            roots,
            known,
            record.roots_generation,
            record.log_level,
        )
        return session, repo.refresh_due(record, now)

    def sweep(self) -> int:
        return self.repo.sweep(self.options.clock())

    def refresh(self, key: str) -> None:
        self.repo.refresh(key, self.options.clock())

    def set_log_level(self, key: str, principal: str, level: str) -> None:
        self.repo.set_log_level(key, principal, level)

    def keep_roots(self, key: str, roots: Roots | None, generation: int) -> None:
        self.repo.store_roots(key, dump_roots(roots), generation)

    def ask(self, key: str, question: str, client_key: str, wait_s: float) -> bool:
        expires = self.options.clock() + timedelta(seconds=wait_s + 60)
        return self.repo.ask(key, question, client_key, expires)

    def cancel(self, key: str, client_key: str, wait_s: float) -> None:
        expires = self.options.clock() + timedelta(seconds=wait_s + 60)
        self.repo.cancel(key, client_key, expires)

    def poll(self, key: str, question: str) -> QuestionState | None:
        return self.repo.poll(key, question)

    def close(self, key: str, question: str) -> None:
        self.repo.close(key, question)
