"""A 2025-11-25 stdio session's `resources/subscribe` and `resources/unsubscribe`.

The session holds one listen of the server's subscription hub, without a subscription id
(2025-11-25 notifications carry none): `notifications/resources/updated {uri}` for each
subscribed note that changed and `notifications/resources/list_changed` whenever a granted
workspace's notes are added or removed (the session's `resources.listChanged`), both written
to the session's stdout by the stdio transport (`StdioStreams.adopt`). Authorized on delivery
as the listen is, through the session's roots too; both answer `{}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from notes_server.errors import InvalidParams, to_wire
from notes_server.features.subscriptions.hub import MAX_URIS, Filter, Listen

if TYPE_CHECKING:
    from notes_server.features.extension import LiveStream
    from notes_server.features.subscriptions.extension import ListenMethod
    from notes_server.features.subscriptions.hub import Roots
    from notes_server.protocol.server import McpServer

Outcome = tuple[dict[str, Any] | None, dict[str, Any] | None]
METHODS = frozenset({"resources/subscribe", "resources/unsubscribe"})


def session_hub(server: McpServer) -> ListenMethod | None:
    """The server's `subscriptions/listen` (its hub, its URI check), None when it serves none."""
    from notes_server.features.subscriptions.extension import ListenMethod
    from notes_server.features.subscriptions.hub import METHOD

    method = server.streams.get(METHOD)
    return method if isinstance(method, ListenMethod) else None


class SessionSubscriptions:
    """What one stdio session subscribed to; `start` hands its stream to the transport."""

    def __init__(
        self,
        method: ListenMethod,
        principal: str,
        start: Callable[[LiveStream], None],
    ) -> None:
        self.roots: Roots | None = None
        self.hub = method.hub
        self.check_uri = method.check_uri
        self.principal = principal
        self.start = start
        self.listen: Listen | None = None
        self.refused: InvalidParams | None = None
        self.uris: set[str] = set()

    def open(self, roots: Roots) -> None:
        """At the session's first `resources/subscribe`: from then on its subscribed notes'
        updates and its workspaces' list changes flow (a session that never subscribes is
        sent nothing it did not ask for)."""
        self.close()
        try:
            self.listen = self.hub.open(
                self.principal, None, Filter(resources_list_changed=True), roots=roots
            )
        except InvalidParams as exc:  # the principal's cap: this session hears nothing
            self.refused = exc
            return
        self.start(self.listen)

    def handle(self, method: str, params: dict[str, Any]) -> Outcome:
        try:
            uri = self.check_uri(params.get("uri"))
            if self.listen is None and method == "resources/subscribe" and self.roots:
                self.open(self.roots)
            if self.listen is None and method == "resources/unsubscribe":
                return {}, None
            if self.listen is None:
                raise self.refused or InvalidParams(
                    "Invalid params: the session is not initialized"
                )
            if method == "resources/unsubscribe":
                self.listen.unwatch(uri)
                self.uris.discard(uri)
                return {}, None
            if uri not in self.uris and len(self.uris) >= MAX_URIS:
                raise InvalidParams(
                    f"Too many resource subscriptions: at most {MAX_URIS} URIs per session",
                    {"limit": MAX_URIS},
                )
            self.hub.watch(self.listen, uri)
            self.uris.add(uri)
            return {}, None
        except InvalidParams as exc:
            return None, to_wire(exc)

    def start_session(self, roots: Roots) -> None:
        """At `initialize`: remember how to narrow; the listen opens at the first subscribe."""
        self.close()
        self.roots = roots

    def close(self) -> None:
        if self.listen is not None:
            self.listen.close()
            self.listen = None
        self.uris.clear()
