"""A 2025-11-25 HTTP session's `resources/subscribe` and `resources/unsubscribe`, durable.

The same checks, limit and answers as on stdio (`compat_2025.subscriptions`): a URI that is
not a note URI is -32602, at most MAX_URIS URIs per session (-32602 past it), both answer `{}`.
A subscription is a row of the session (`store.session_subscriptions`): the note its URI names
for the principal now (grants and consent; the session's roots are applied on delivery, when
they are known) and the change-log sequence it was made at, so the session's GET stream at any
worker or instance sends `notifications/resources/updated` for later changes of that note, and
`notifications/resources/list_changed` from the session's first subscribe on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from notes_server.compat_2025.subscriptions import Outcome
from notes_server.errors import InvalidParams, to_wire
from notes_server.features.subscriptions.hub import MAX_URIS, check_uri, resolve_note
from notes_server.store import changes, session_subscriptions
from notes_server.store.engine import write_tx

if TYPE_CHECKING:
    from sqlalchemy import Engine


def handle(
    engine: Engine,
    key: str,
    principal: str,
    method: str,
    params: Any,
    check: Callable[[object], str] = check_uri,
) -> Outcome:
    """Answer one subscribe or unsubscribe of the session `key`. Blocking: a worker thread.
    `check`: the server's listen's URI check (`ListenMethod.check_uri`)."""
    try:
        uri = check(params.get("uri") if isinstance(params, dict) else None)
        with write_tx(engine) as conn:
            if method == "resources/unsubscribe":
                session_subscriptions.unsubscribe(conn, key, uri)
                return {}, None
            known = session_subscriptions.is_subscribed(conn, key, uri)
            if not known and session_subscriptions.count(conn, key) >= MAX_URIS:
                raise InvalidParams(
                    f"Too many resource subscriptions: at most {MAX_URIS} URIs per session",
                    {"limit": MAX_URIS},
                )
            note_id = resolve_note(conn, principal, uri, None)
            session_subscriptions.subscribe(conn, key, uri, note_id, changes.latest(conn))
        return {}, None
    except InvalidParams as exc:
        return None, to_wire(exc)
