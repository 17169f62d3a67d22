"""notes_purge: permanently delete every archived note of a workspace, approved out of band.

Form mode is for choices a person makes inside the host; this one must not pass through the
client at all. Round 1 stores the exact archived set (ids, versions, titles) as a pending
approval row, and answers `input_required` with a URL-mode elicitation pointing at this server's
own approval page (`notes_server.features.purge`) plus a state that binds the approval id and the
set's digest. `accept` only means the person agreed to open the URL: round 2 purges only when
the row says the page was completed by the same principal, and then, in ONE write transaction
with the nonce claim and the audit, deletes the archived set only if it is exactly the approved
one (same ids, same versions). If it changed, nothing is deleted: the approval is retired and a
fresh one is asked for, whose message says what changed. Decline and cancel change nothing but
are audited; decline is final (the approval and its state are retired), cancel only stops: as
for `notes_delete`, the approval and its state stay usable until they expire, so the same
state may be answered `accept` later.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from notes_server.errors import InvalidParams, MissingCapability, StateRejected, ToolFailure
from notes_server.tools.base import CallContext, InputRequired, ToolResult, tool_hints
from notes_server.tools.confirm import Action, ConfirmedAction
from notes_server.tools.scope import authorize
from notes_server.tools.views import WORKSPACE_URI, schema

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.security.request_state import Claims
    from notes_server.store.approvals import Approval, Item
    from notes_server.store.notes import NoteRecord
    from notes_server.tools.services import Services

APPROVAL_PATH = "/approval"
APPROVAL_TTL = timedelta(minutes=15)
REQUIRED_CAPABILITIES: dict[str, Any] = {"elicitation": {"url": {}}}
INVALID_ANSWER = "Invalid approval answer: expected action accept, decline or cancel"


def allows_url_elicitation(capabilities: dict[str, Any]) -> bool:
    """Only an explicit `url` mode counts: `elicitation: {}` means form only."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)


def link_hash(secret: str) -> str:
    """What the database keeps of a one-time link secret."""
    from hashlib import sha256  # not at start: hashlib loads OpenSSL (~2.5 ms)

    return sha256(secret.encode("utf-8")).hexdigest()


def set_digest(items: Sequence[tuple[str, int, str]]) -> str:
    """SHA-256 over the bound (id, version) pairs: the state carries this, the row the set."""
    pairs = sorted([item[0], item[1]] for item in items)
    from hashlib import sha256

    return sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()


def last_segment(workspace: str) -> str:
    """What the person types to confirm: the workspace's last path segment."""
    return workspace.rstrip("/").rsplit("/", 1)[-1]


MAX_NAMED = 5


class SetChanged(Exception):
    """A bound note changed while the purge transaction ran: roll it all back."""


def items_of(found: Sequence[NoteRecord]) -> list[Item]:
    return [(note.id, note.version, note.title) for note in found]


def notes_delete(conn: Connection, note: NoteRecord) -> bool:
    from notes_server.store import notes

    return notes.delete_note(conn, note)


def _named(label: str, titles: Sequence[str]) -> str:
    shown = ", ".join(json.dumps(title, ensure_ascii=False) for title in titles[:MAX_NAMED])
    more = f" and {len(titles) - MAX_NAMED} more" if len(titles) > MAX_NAMED else ""
    return f"{len(titles)} {label} ({shown}{more})"


def describe_changes(
    conn: Connection, workspace: str, approved: Sequence[Item], current: Sequence[Item]
) -> str:
    """One sentence naming what changed between the approved and the current archived set:
    counts and titles of notes newly archived, restored, deleted and edited."""
    from notes_server.store import notes

    before = {note_id: (version, title) for note_id, version, title in approved}
    now = {note_id: (version, title) for note_id, version, title in current}
    added = [now[i][1] for i in now if i not in before]
    edited = [now[i][1] for i in now if i in before and now[i][0] != before[i][0]]
    restored: list[str] = []
    deleted: list[str] = []
    for note_id in before:
        if note_id not in now:
            gone = notes.get_note(conn, workspace, note_id) is None
            (deleted if gone else restored).append(before[note_id][1])
    parts = [
        _named(label, titles)
        for label, titles in (
            ("newly archived", added),
            ("restored", restored),
            ("deleted", deleted),
            ("edited", edited),
        )
        if titles
    ]
    if not parts:
        return "The archived notes changed while they were being purged, so nothing was deleted."
    return (
        "The archived notes changed since the approval: " + "; ".join(parts) + ". Nothing was "
        "deleted."
    )


class PurgeNotes(ConfirmedAction):
    name = "notes_purge"
    title = "Purge archived notes"
    description = (
        "Permanently delete EVERY archived note in an authorized workspace. Irreversible. The "
        "user must approve on this server's own web page (URL-mode elicitation): the client "
        "must declare elicitation with url mode, open the URL for the user, then retry with "
        "accept. If the archived notes change before the purge, nothing is deleted and a new "
        "approval is asked for."
    )
    action = Action(
        tool="notes_purge",
        input_key="purge_approval",
        phase="purge/approve",
        verb="purge",
        flag="purged",
        done="purged",
        confirm_title="Approve the purge on the approval page",
    )
    input_schema = schema({"workspaceUri": WORKSPACE_URI}, ["workspaceUri"])
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "purged": {"type": "boolean"},
            "outcome": {"type": "string", "enum": ["purged", "declined", "cancelled"]},
            "purgedCount": {"type": "integer"},
            "purgedIds": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["purged", "outcome"],
    }
    tool_annotations = tool_hints("Purge archived notes", read_only=False, destructive=True)

    def __init__(self, services: Services, page_base: Callable[[], str]) -> None:
        """`page_base()` is the approval page's origin (over stdio, calling it starts the
        loopback listener), asked only when a URL is sent."""
        super().__init__(services)
        self.page_base = page_base

    # -- round dispatch -------------------------------------------------------------------

    def require_capability(self, capabilities: dict[str, Any]) -> None:
        if not allows_url_elicitation(capabilities):
            raise MissingCapability(
                "This tool needs approval on the server's own page: the request must declare "
                "the elicitation capability with url mode",
                {"requiredCapabilities": {"elicitation": {"url": {}}}},
            )

    def respond(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, answer: Any
    ) -> ToolResult | InputRequired:
        """Unlike a form, a page has no "no" inside the answer, and no answer is not a retry."""
        kind = answer.get("action") if isinstance(answer, dict) else None
        if kind == "cancel":
            return self.stop(ctx, args, claims)
        if kind == "decline":
            return self.close(ctx, args, claims, "declined")
        if kind == "accept":
            return self.accept_purge(ctx, args, claims)
        raise InvalidParams(INVALID_ANSWER)

    # -- round 1 --------------------------------------------------------------------------

    def ask(self, ctx: CallContext, args: dict[str, Any]) -> InputRequired:
        from notes_server.store import approvals
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            items = items_of(approvals.archived_notes(conn, workspace.uri))
            if not items:
                raise ToolFailure("No archived notes in this workspace: nothing to purge.")
            payload = self.open_approval(conn, ctx, workspace.uri, items)
        return self.ask_again(ctx, workspace.uri, payload)

    def open_approval(
        self, conn: Connection, ctx: CallContext, workspace: str, items: Sequence[Item]
    ) -> dict[str, Any]:
        """Store a pending approval for exactly `items`; the state payload that names it."""
        import secrets  # not at start: it loads hashlib, and hashlib OpenSSL

        from notes_server.store import approvals

        approval_id = "pa-" + secrets.token_hex(16)
        secret = secrets.token_urlsafe(32)
        now = self.services.clock()
        approvals.prune(conn, expired_before=now)
        approvals.create(
            conn,
            approval_id=approval_id,
            principal=ctx.principal,
            workspace=workspace,
            link_hash=link_hash(secret),
            items=items,
            set_digest=set_digest(items),
            now=now,
            expires_at=now + APPROVAL_TTL,
        )
        return {"pa": approval_id, "sd": set_digest(items), "k": secret, "cnt": len(items)}

    def ask_again(self, ctx: CallContext, workspace: str, payload: dict[str, Any]) -> InputRequired:
        """The URL elicitation for a pending approval (same URL and message on every round).

        2026-07-28 URL params are exactly {mode, message, url}: no `elicitationId` (the legacy
        adapter adds one for 2025-11-25 clients); the approval id travels in the state."""
        state = self.services.states.issue(
            principal=ctx.principal,
            tool=self.action.tool,
            phase=self.action.phase,
            arguments=self.bound_arguments(workspace, {}),
            payload=payload,
            ttl=APPROVAL_TTL.total_seconds(),
        )
        base = self.page_base().rstrip("/")
        url = f"{base}{APPROVAL_PATH}?a={payload['pa']}&k={payload['k']}"
        message = (
            f"Permanently delete {payload['cnt']} archived note(s) in {workspace}? This cannot "
            "be undone. Open the approval page on this server to review and approve them."
        )
        changed = payload.get("chg")
        if isinstance(changed, str):
            message = f"{changed} {message}"
        params = {"mode": "url", "message": message, "url": url}
        request = {"method": "elicitation/create", "params": params}
        return InputRequired({self.action.input_key: request}, state)

    # -- round 2 --------------------------------------------------------------------------

    @staticmethod
    def bound_arguments(workspace: str, args: dict[str, Any]) -> dict[str, Any]:
        """What the state binds: only the workspace, in canonical form."""
        return {"workspaceUri": workspace}

    @staticmethod
    def payload_complete(payload: Mapping[str, Any]) -> bool:
        """The approval id, the set's digest and its kind must all be there."""
        return all(isinstance(payload.get(key), str) for key in ("pa", "sd", "k"))

    def accept_purge(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims
    ) -> ToolResult | InputRequired:
        from notes_server.store import approvals
        from notes_server.store.engine import read_tx, retrying

        with read_tx(self.services.engine) as conn:
            approval = approvals.get(conn, claims.payload["pa"])
        self.check_binding(ctx, approval, claims)
        assert approval is not None  # check_binding refuses a missing row
        if approval.approved_at is None:
            return self.ask_again(ctx, approval.workspace, dict(claims.payload))
        done = retrying(lambda: self.purge(ctx, args, claims))
        if done is not None:
            return done
        return retrying(lambda: self.ask_after_change(ctx, args, claims))

    def check_binding(self, ctx: CallContext, approval: Approval | None, claims: Claims) -> None:
        """The row must be the one this state names, for this principal and set."""
        if approval is None:
            raise StateRejected("approval no longer exists (used, declined or expired)")
        if approval.principal != ctx.principal or approval.set_digest != claims.payload["sd"]:
            raise StateRejected("approval does not match the state")
        if approval.expires_at <= self.services.clock():
            raise StateRejected("approval expired")
        if approval.locked:  # as good as dropped: only a new purge asks for a new approval
            raise StateRejected("approval locked after too many wrong sign-ins")

    def purge(self, ctx: CallContext, args: dict[str, Any], claims: Claims) -> ToolResult | None:
        """ONE transaction: re-authorize, re-check that the archived set is exactly the
        approved one, claim the nonce, delete, audit each note. None (everything rolled back)
        when the set changed: nothing at all is deleted then."""
        from notes_server.store import approvals, nonces
        from notes_server.store.engine import write_tx

        try:
            with write_tx(self.services.engine) as conn:
                nonces.lock(conn, claims.nonce)  # racing answers queue here first (PostgreSQL)
                workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
                approval = approvals.get(conn, claims.payload["pa"])
                self.check_binding(ctx, approval, claims)
                assert approval is not None and approval.approved_at is not None
                found = approvals.archived_notes(conn, workspace.uri)
                if sorted(items_of(found)) != sorted(approval.items):
                    return None
                now = self.services.clock()
                ids = [note.id for note in found]
                result = self.finished("purged", purgedCount=len(ids), purgedIds=ids)
                self.claim(conn, ctx, claims, "purged", claims.payload["sd"], result, now)
                self.services.checkpoint("purge.claimed")
                for note in found:
                    if not notes_delete(conn, note):
                        raise SetChanged  # changed under us (PostgreSQL): undo every delete
                    self.audit(conn, ctx, workspace.uri, "purged", note, claims, note.title, now)
                approvals.discard(conn, approval.id)
        except SetChanged:
            return None
        return result

    def ask_after_change(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims
    ) -> ToolResult | InputRequired:
        """The archived set is not the approved one: retire the approval and its state (the
        nonce is claimed as "changed"), and ask again with a fresh approval that says what
        changed. Nothing is deleted."""
        from notes_server.store import approvals, nonces
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            nonces.lock(conn, claims.nonce)
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            approval = approvals.get(conn, claims.payload["pa"])
            self.check_binding(ctx, approval, claims)
            assert approval is not None
            items = items_of(approvals.archived_notes(conn, workspace.uri))
            summary = describe_changes(conn, workspace.uri, approval.items, items)
            now = self.services.clock()
            self.claim(conn, ctx, claims, "changed", None, None, now)
            title = f"purge of {len(approval.items)} archived note(s): set changed"
            self.audit(conn, ctx, workspace.uri, "changed", None, claims, title, now)
            approvals.discard(conn, approval.id)
            payload = self.open_approval(conn, ctx, workspace.uri, items) if items else None
        if payload is None:
            raise ToolFailure(f"{summary} No archived notes are left to purge.")
        payload["chg"] = summary
        return self.ask_again(ctx, workspace.uri, payload)

    def stop(self, ctx: CallContext, args: dict[str, Any], claims: Claims) -> ToolResult:
        """Cancel: nothing is deleted and the cancel is audited, but neither the nonce nor the
        approval is spent, so the page and a later `accept` with the same state still work
        until they expire. A state whose answer was already used is not cancellable."""
        from notes_server.store import nonces
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            nonces.lock(conn, claims.nonce)  # after a racing accept, not beside it
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            if nonces.get(conn, claims.nonce) is not None:
                raise StateRejected("confirmation nonce already consumed")
            title = f"purge of {claims.payload.get('cnt', '?')} archived note(s)"
            now = self.services.clock()
            self.audit(conn, ctx, workspace.uri, "cancelled", None, claims, title, now)
        return self.finished("cancelled")

    def close(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, outcome: str
    ) -> ToolResult:
        """Decline: nothing is deleted; the approval is dropped and the answer audited once
        (the nonce claim makes a second answer to the same state fail)."""
        from notes_server.store import approvals, nonces
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            nonces.lock(conn, claims.nonce)  # racing answers queue here first (PostgreSQL)
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            now = self.services.clock()
            self.claim(conn, ctx, claims, outcome, None, None, now)
            title = f"purge of {claims.payload.get('cnt', '?')} archived note(s)"
            self.audit(conn, ctx, workspace.uri, outcome, None, claims, title, now)
            approvals.discard(conn, claims.payload["pa"])
        return self.finished(outcome)
