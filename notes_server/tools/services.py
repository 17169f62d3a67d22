"""What tools share: settings, the clock, the database engine and the request-state boundary.

Built once by the composition root. The engine and the sealer are created on first use so that a
server answers `server/discover` and `tools/list` before SQLAlchemy or cryptography is imported.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from notes_server.config import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from notes_server.security.request_state import RequestStates
    from notes_server.security.state import StateSealer


def utc_now() -> datetime:
    """Aware UTC: what the store's timestamp columns take and return, on every backend."""
    return datetime.now(UTC)


class Services:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utc_now,
        engine: Engine | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._engine = engine
        self._owns_engine = engine is None
        self._sealer: StateSealer | None = None
        self._states: RequestStates | None = None
        self._lock = threading.Lock()
        self._semantic: bool | None = None
        self._embedder: Any = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    from notes_server.store.engine import make_engine

                    self._engine = make_engine(
                        self.settings.db_url, store_impl=self.settings.store_impl
                    )
        return self._engine

    def close(self) -> None:
        """Close the pooled connections of the engine these services made. An engine handed in
        belongs to whoever made it: disposing it here would close connections (SQLite snapshots
        included) that other apps or threads on the same engine are still using."""
        if self._owns_engine and self._engine is not None:
            self._engine.dispose()

    @property
    def sealer(self) -> StateSealer:
        if self._sealer is None:
            with self._lock:
                if self._sealer is None:
                    self._sealer = self._build_sealer()
        return self._sealer

    @property
    def states(self) -> RequestStates:
        """The request-state boundary every multi round-trip tool issues and verifies through."""
        if self._states is None:
            from notes_server.security.request_state import RequestStates

            states = RequestStates(
                self.sealer, audience=self.settings.state_audience, ttl=self.settings.state_ttl
            )
            with self._lock:
                if self._states is None:
                    self._states = states
        return self._states

    def _build_sealer(self) -> StateSealer:
        from notes_server.security.keyring import KeyRing
        from notes_server.security.state import StateSealer

        if self.settings.state_keys:
            ring = KeyRing.parse(self.settings.state_keys)
        else:
            key_file = self.settings.state_key_file
            if key_file is None:
                raise RuntimeError(
                    "NOTES_SERVER_STATE_KEYS must be set for databases other than embedded SQLite"
                )
            ring = KeyRing.load_or_create_file(key_file)
        return StateSealer(ring, clock=lambda: self.clock().timestamp())

    def semantic_available(self) -> bool:
        """Whether semantic search is offered: the extra is installed and not turned off
        (`app.check_settings` has checked its model files at start; nothing is loaded here)."""
        if self._semantic is None:
            from notes_server.store import embedding

            self._semantic = self.settings.semantic != "off" and embedding.installed()
        return self._semantic

    def embedder(self) -> Any:
        """The embedding model, loaded on first use (never for keyword-only searches)."""
        if self._embedder is None:
            from notes_server.store.embedding import Embedder

            with self._lock:
                if self._embedder is None:
                    self._embedder = Embedder()
        return self._embedder

    def checkpoint(self, point: str) -> None:
        """A named step of a confirmed mutation. Crash-safety tests set `pause_at` to freeze
        the process here (then SIGKILL it); otherwise this does nothing."""
        if self.settings.pause_at != point:
            return
        sys.stderr.write(f"notes-server paused at {point}\n")
        sys.stderr.flush()
        threading.Event().wait()

    def warm_up(self) -> None:
        """Import and connect the heavy parts ahead of the first tool call (background thread)."""
        from notes_server.store.engine import connect_once

        connect_once(self.engine)
