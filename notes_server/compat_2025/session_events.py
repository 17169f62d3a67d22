"""The events of a 2025-11-25 HTTP session's GET stream, computed from the change log.

Each committed change (sequence `seq`) gives the session, in this order, one
`notifications/resources/updated {uri}` per URI it subscribed to that change's note (sorted),
then `notifications/resources/list_changed` when it changed a listing, each only when the
subscription (or the session's first subscribe, for list changes) is older than the change,
and only for a change in a workspace the principal may read now. The same change always gives
the same events, so an event id names one: `g<tag>-<seq>-<n>`, the n-th event of change `seq`
on the GET stream of the session whose tag is `<tag>` (derived from the session's key, so an
id of another session's stream is told apart). `g<tag>-<seq>` (the priming event) names the
position after all of change `seq`. A `Last-Event-ID` is read back into that position.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from notes_server.jsontext import dump_bytes
from notes_server.store.changes import LIST_KINDS, Change
from notes_server.store.session_subscriptions import StreamState

_EVENT_ID = re.compile(r"g([0-9a-f]{8})-([0-9]{1,18})(?:-([0-9]{1,6}))?")
MAX_EVENT_ID_CHARS = 64


class Position(NamedTuple):
    """After change `seq`'s events up to number `event` (None: all of them)."""

    seq: int
    event: int | None = None


class Event(NamedTuple):
    id: str
    data: bytes


class NotOurs(ValueError):
    """A `Last-Event-ID` that is malformed or names another session's stream."""


def stream_tag(session_key: str) -> str:
    """Eight hex digits naming the session's GET stream (not its id, not its stored key)."""
    return hashlib.sha256(f"get-stream:{session_key}".encode()).hexdigest()[:8]


def event_id(tag: str, seq: int, index: int | None = None) -> str:
    return f"g{tag}-{seq}" if index is None else f"g{tag}-{seq}-{index}"


def read_position(tag: str, last_event_id: str) -> Position:
    """The position a `Last-Event-ID` names; NotOurs when it is none of this stream's ids."""
    match = _EVENT_ID.fullmatch(last_event_id.strip()[:MAX_EVENT_ID_CHARS])
    if match is None or len(last_event_id.strip()) > MAX_EVENT_ID_CHARS:
        raise NotOurs("malformed")
    if match.group(1) != tag:
        raise NotOurs("another stream")
    index = match.group(3)
    return Position(int(match.group(2)), None if index is None else int(index))


def _message(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dump_bytes(message)


def change_events(
    tag: str, change: Change, state: StreamState, readable: frozenset[str]
) -> list[Event]:
    """All events of one change for this session (before any position is applied)."""
    if not any(workspace in readable for workspace in change.workspaces()):
        return []
    messages = [
        _message("notifications/resources/updated", {"uri": sub.uri})
        for sub in state.subscribed
        if sub.note_id == change.note_id and sub.from_seq < change.seq
    ]
    listing_from = state.list_from_seq
    if change.kind in LIST_KINDS and listing_from is not None and listing_from < change.seq:
        messages.append(_message("notifications/resources/list_changed"))
    return [Event(event_id(tag, change.seq, n), data) for n, data in enumerate(messages)]


def events_after(
    tag: str,
    position: Position,
    changes: Sequence[Change],
    state: StreamState,
    readable: frozenset[str],
) -> Iterable[Event]:
    """The events of `changes` (oldest first, all after `position.seq - 1`) not yet sent."""
    for change in changes:
        if change.seq < position.seq:
            continue
        found = change_events(tag, change, state, readable)
        if change.seq == position.seq:
            skip = len(found) if position.event is None else position.event + 1
            found = found[skip:]
        yield from found
