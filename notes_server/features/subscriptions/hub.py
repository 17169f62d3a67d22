"""Change subscriptions: which open listens hear about which committed changes.

One `SubscriptionHub` per server (per `Services`, so per engine) is the only listener of the
engine's change feed (`store.changes.feed`): for each batch of changes it finds the listens
that care (a watched note id, or a listing change when `resourcesListChanged` was asked), then
checks each principal's grants as they are NOW, one read per principal per batch, and queues
the notifications of the changes in workspaces it may still read (a revoked grant stops
delivery with the next change; a notification never carries content, only the URI).

A listen's queue is bounded (QUEUE_LIMIT messages): a reader that does not drain it is dropped
(`Listen.dropped`), the feed thread never waits for it, so nobody else is slowed. The
transports own delivery: they `attach` a wake-up callback and `drain` (stdio: a thread per
listen writing lines; HTTP: the SSE response's coroutine).

Shapes and limits: docs/subscriptions.md.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from notes_server.errors import InvalidParams, UriError
from notes_server.features.resources import scheme_of
from notes_server.jsontext import dump_bytes
from notes_server.security.principals import consented_workspaces
from notes_server.security.uri import WorkspaceUri, parse_note_uri, parse_workspace_uri
from notes_server.store.per_object import OnePer
from notes_server.tools.scope import usable_workspaces, within_roots
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.changes import Change, Subscription

log = logging.getLogger("notes_server.subscriptions")

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
METHOD = "subscriptions/listen"
# The scheme of note URIs, the only resources the change log watches.
NOTE_SCHEME = "file"
MAX_URIS = 1000
MAX_URI_CHARS = 4096
MAX_LISTENS_PER_PRINCIPAL = 32
QUEUE_LIMIT = 1000
RequestId = str | int
Roots = Callable[[], "tuple[WorkspaceUri, ...] | None"]


def _no_roots() -> tuple[WorkspaceUri, ...] | None:
    return None


class Filter(NamedTuple):
    """A `SubscriptionFilter`, as far as this server honors it."""

    tools_list_changed: bool = False
    prompts_list_changed: bool = False
    resources_list_changed: bool = False
    resource_subscriptions: tuple[str, ...] = ()
    # The task ids agreed to (`notifications/tasks`); None when none were asked for.
    task_ids: tuple[str, ...] | None = None

    def acknowledged(self) -> dict[str, Any]:
        """What `notifications/subscriptions/acknowledged` echoes: the types asked for."""
        ack: dict[str, Any] = {}
        if self.tools_list_changed:
            ack["toolsListChanged"] = True
        if self.prompts_list_changed:
            ack["promptsListChanged"] = True
        if self.resources_list_changed:
            ack["resourcesListChanged"] = True
        if self.resource_subscriptions:
            ack["resourceSubscriptions"] = list(self.resource_subscriptions)
        if self.task_ids is not None:
            ack["taskIds"] = list(self.task_ids)
        return ack


_FLAGS = {
    "toolsListChanged": "tools_list_changed",
    "promptsListChanged": "prompts_list_changed",
    "resourcesListChanged": "resources_list_changed",
}


def read_filter(params: dict[str, Any], others: Collection[str] = ()) -> Filter:
    """`params.notifications` of a listen, checked (-32602 with a clear message); `others`
    as for `check_uri`."""
    raw = params.get("notifications")
    if not isinstance(raw, dict):
        raise InvalidParams("Invalid params: notifications must be an object")
    flags: dict[str, Any] = {}
    for key, field in _FLAGS.items():
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise InvalidParams(f"Invalid params: notifications.{key} must be a boolean")
        flags[field] = value
    uris = raw.get("resourceSubscriptions", [])
    if not isinstance(uris, list):
        raise InvalidParams("Invalid params: notifications.resourceSubscriptions must be a list")
    return Filter(**flags, resource_subscriptions=check_uris(uris, others))


def check_uris(uris: Sequence[object], others: Collection[str] = ()) -> tuple[str, ...]:
    if len(uris) > MAX_URIS:
        raise InvalidParams(
            f"Too many resource subscriptions: at most {MAX_URIS} URIs per listen",
            {"limit": MAX_URIS, "requested": len(uris)},
        )
    unique: dict[str, None] = {}
    for uri in uris:
        unique[check_uri(uri, others)] = None
    return tuple(unique)


def check_uri(uri: object, others: Collection[str] = ()) -> str:
    """`uri` when a subscription may name it: a note URI, or a URI of one of `others` (the
    schemes of resource providers whose resources never change: accepted, never firing, like
    a note URI that names nothing readable); -32602 otherwise."""
    if not isinstance(uri, str) or len(uri) > MAX_URI_CHARS:
        raise InvalidParams("Invalid params: a resource subscription must be a note URI")
    try:
        parse_note_uri(uri)
    except UriError:
        scheme = scheme_of(uri)
        if scheme is not None and scheme != NOTE_SCHEME and scheme in others:
            return uri
        raise InvalidParams(
            "Invalid params: not a note URI", {"uri": uri[:MAX_URI_CHARS]}
        ) from None
    return uri


class Listen:
    """One open subscription: its filter, the notes it watches, its bounded queue.

    `tag` is the listen request's id, put in every notification's `_meta` (2026-07-28); None
    for a 2025-11-25 session, whose notifications carry no subscription id."""

    def __init__(
        self,
        hub: SubscriptionHub,
        principal: str,
        tag: RequestId | None,
        wanted: Filter,
        roots: Roots = _no_roots,
    ) -> None:
        self.hub = hub
        self.principal = principal
        self.tag = tag
        self.wanted = wanted
        self.roots = roots
        self.watched: dict[str, set[str]] = {}  # note id -> the URIs it was subscribed by
        self._lock = threading.Lock()
        self._queue: deque[bytes] = deque()
        self._wake: Callable[[], None] | None = None
        self.dropped = False
        self.closed = False

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        body = dict(params or {})
        if self.tag is not None:
            body["_meta"] = {SUBSCRIPTION_ID: self.tag}
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if body:
            message["params"] = body
        return dump_bytes(message)

    def final(self) -> bytes:
        """The graceful end's response (2026-07-28); nothing for a 2025-11-25 session."""
        if self.tag is None:
            return b""
        return dump_bytes(
            {
                "jsonrpc": "2.0",
                "id": self.tag,
                "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: self.tag}},
            }
        )

    def cancelled(self, reason: str) -> bytes:
        """The server's own teardown notice on stdio (`notifications/cancelled`)."""
        if self.tag is None:
            return b""
        return dump_bytes(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": self.tag, "reason": reason},
            }
        )

    def offer(self, messages: Sequence[bytes]) -> None:
        """Queue messages (any thread, never blocks); past the bound the listen is dropped."""
        if not messages:
            return
        with self._lock:
            if self.closed or self.dropped:
                return
            if len(self._queue) + len(messages) > QUEUE_LIMIT:
                self.dropped = True
                self._queue.clear()
                log.info("a subscription was dropped: its reader fell %d behind", QUEUE_LIMIT)
            else:
                self._queue.extend(messages)
            wake = self._wake
        if wake is not None:
            wake()
        if self.dropped:
            self.hub.remove(self)

    def attach(self, wake: Callable[[], None]) -> None:
        """`wake()` is called (from any thread) whenever something is queued or it ended."""
        with self._lock:
            self._wake = wake
            pending = bool(self._queue) or self.dropped or self.closed
        if pending:
            wake()

    def drain(self) -> tuple[list[bytes], bool]:
        """What is queued, and whether the listen has ended (dropped or closed)."""
        with self._lock:
            taken = list(self._queue)
            self._queue.clear()
            return taken, self.dropped or self.closed

    def close(self) -> None:
        """End it (the client went away or cancelled); nothing more is queued."""
        with self._lock:
            self.closed = True
            wake = self._wake
        self.hub.remove(self)
        if wake is not None:
            wake()

    def watch(self, uri: str, note_id: str) -> None:
        with self._lock:
            self.watched.setdefault(note_id, set()).add(uri)

    def unwatch(self, uri: str) -> None:
        with self._lock:
            for note_id in [n for n, uris in self.watched.items() if uri in uris]:
                self.watched[note_id].discard(uri)
                if not self.watched[note_id]:
                    del self.watched[note_id]

    def matches(self, batch: Sequence[Change]) -> list[tuple[Change, tuple[str, ...]]]:
        """The changes that concern this listen, with the watched URIs each one updates."""
        from notes_server.store.changes import LIST_KINDS

        with self._lock:
            watched = {n: tuple(sorted(uris)) for n, uris in self.watched.items()}
        listing = self.wanted.resources_list_changed
        found = []
        for change in batch:
            uris = watched.get(change.note_id, ())
            if uris or (listing and change.kind in LIST_KINDS):
                found.append((change, uris))
        return found


class SubscriptionHub:
    """Every open listen of one server, fed by the engine's one change feed."""

    def __init__(self, services: Services, max_per_principal: int = MAX_LISTENS_PER_PRINCIPAL):
        self.services = services
        self.max_per_principal = max_per_principal
        self._lock = threading.Lock()
        self._listens: list[Listen] = []
        self._feed: Subscription | None = None

    def open(
        self,
        principal: str,
        tag: RequestId | None,
        wanted: Filter,
        roots: Roots = _no_roots,
    ) -> Listen:
        """A registered listen whose first queued message is the acknowledgement (2026-07-28);
        -32602 past the per-principal cap."""
        from notes_server.store.engine import read_tx

        listen = Listen(self, principal, tag, wanted, roots)
        if tag is not None:
            listen.offer(
                [
                    listen.notification(
                        "notifications/subscriptions/acknowledged",
                        {"notifications": wanted.acknowledged()},
                    )
                ]
            )
        self._register(listen)
        try:
            if wanted.resource_subscriptions:
                with read_tx(self.services.engine) as conn:
                    for uri in wanted.resource_subscriptions:
                        self._resolve(conn, listen, uri)
        except BaseException:
            self.remove(listen)
            raise
        return listen

    def watch(self, listen: Listen, uri: str) -> None:
        """Add one URI to a listen (2025-11-25 `resources/subscribe`)."""
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            self._resolve(conn, listen, uri)

    def _register(self, listen: Listen) -> None:
        from notes_server.store.changes import feed

        name = str(listen.principal)
        with self._lock:
            open_now = sum(1 for other in self._listens if str(other.principal) == name)
            if open_now >= self.max_per_principal:
                raise InvalidParams(
                    f"Too many open subscriptions: at most {self.max_per_principal} per principal",
                    {"limit": self.max_per_principal},
                )
            self._listens.append(listen)
            if self._feed is None:
                self._feed = feed(self.services.engine).subscribe(self._on_changes)

    def remove(self, listen: Listen) -> None:
        with self._lock:
            if listen in self._listens:
                self._listens.remove(listen)
            subscription = self._feed if not self._listens else None
            if subscription is not None:
                self._feed = None
        if subscription is not None:
            subscription.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._listens)

    def _resolve(self, conn: Connection, listen: Listen, uri: str) -> None:
        """Watch the note at `uri` when the principal may read it now (`resolve_note`)."""
        note_id = resolve_note(conn, listen.principal, uri, listen.roots())
        if note_id is not None:
            listen.watch(uri, note_id)

    def _on_changes(self, batch: Sequence[Change]) -> None:
        """The feed thread: match, authorize once per principal, queue (never blocks)."""
        with self._lock:
            listens = list(self._listens)
        concerned = [(listen, found) for listen in listens if (found := listen.matches(batch))]
        if not concerned:
            return
        from notes_server.store.engine import read_tx

        readable: dict[tuple[Any, ...], frozenset[str]] = {}
        with read_tx(self.services.engine) as conn:
            for listen, _ in concerned:
                key = _principal_key(listen)
                if key not in readable:
                    readable[key] = frozenset(
                        usable_workspaces(conn, listen.principal, listen.roots())
                    )
        for listen, found in concerned:
            listen.offer(_notifications(listen, found, readable[_principal_key(listen)]))


def resolve_note(
    conn: Connection, principal: str, uri: str, roots: tuple[WorkspaceUri, ...] | None
) -> str | None:
    """The id of the note at `uri` when the principal may read it now (as `resources/read`
    decides: grants, OAuth consent, roots), else None: a URI that names nothing readable is
    accepted by a subscribe and never fires, so the answer does not tell which notes exist."""
    from notes_server.store import grants, notes

    try:
        target = parse_note_uri(uri)
    except UriError:  # another provider's resource (`check_uri`): nothing the log watches
        return None
    consented = consented_workspaces(principal)
    for grant in grants.list_grants(conn, principal):
        try:
            workspace = parse_workspace_uri(grant.workspace)
        except UriError:
            continue
        if not workspace.contains(target) or not within_roots(workspace, roots):
            continue
        if consented is not None and workspace.uri not in consented:
            continue
        path = "/".join(target[len(workspace.segments) :])
        note = notes.get_note_by_path(conn, workspace.uri, path)
        if note is not None:
            return note.id
    return None


_HUBS: OnePer[Services, SubscriptionHub] = OnePer(SubscriptionHub)


def hub_of(services: Services) -> SubscriptionHub:
    """The one hub of a server's services: the 2026-07-28 listens and the 2025-11-25 sessions'
    subscriptions share it (and its one change-feed listener)."""
    return _HUBS(services)


def _principal_key(listen: Listen) -> tuple[Any, ...]:
    return (str(listen.principal), consented_workspaces(listen.principal), listen.roots())


def _notifications(
    listen: Listen, found: Sequence[tuple[Change, tuple[str, ...]]], readable: frozenset[str]
) -> list[bytes]:
    """One `resources/updated` per watched URI and one `list_changed` per batch, only for
    changes in a workspace the principal may read now."""
    from notes_server.store.changes import LIST_KINDS

    updated: dict[str, None] = {}
    listing = False
    for change, uris in found:
        if not any(w in readable for w in change.workspaces()):
            continue
        for uri in uris:
            updated[uri] = None
        if listen.wanted.resources_list_changed and change.kind in LIST_KINDS:
            listing = True
    messages = [
        listen.notification("notifications/resources/updated", {"uri": uri}) for uri in updated
    ]
    if listing:
        messages.append(listen.notification("notifications/resources/list_changed"))
    return messages
