"""notes_purge: permanently delete every archived note of a workspace, approved out of band.

Form mode is for choices a person makes inside the host; this one must not pass through the
client at all. Round 1 stores the exact archived set (ids, versions, titles) as a pending
approval row, and answers `input_required` with a URL-mode elicitation pointing at this server's
own approval page (`notes_server.approval`) plus a state that binds the approval id and the
set's digest. `accept` only means the person agreed to open the URL: round 2 purges only when
the row says the page was completed by the same principal, and then, in ONE write transaction
with the nonce claim and the audit, deletes exactly the bound notes whose versions still match
(the rest are kept and reported). Decline and cancel change nothing but are audited.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from notes_server.errors import InvalidParams, MissingCapability, StateRejected, ToolFailure
from notes_server.tools.base import CallContext, InputRequired, ToolResult, tool_hints
from notes_server.tools.confirm import Action, ConfirmedAction
from notes_server.tools.scope import authorize
from notes_server.tools.views import WORKSPACE_URI, schema

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.security.request_state import Claims
    from notes_server.store.approvals import Approval
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
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def set_digest(items: Sequence[tuple[str, int, str]]) -> str:
    """SHA-256 over the bound (id, version) pairs: the state carries this, the row the set."""
    pairs = sorted([item[0], item[1]] for item in items)
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()


def last_segment(workspace: str) -> str:
    """What the person types to confirm: the workspace's last path segment."""
    return workspace.rstrip("/").rsplit("/", 1)[-1]


class PurgeNotes(ConfirmedAction):
    name = "notes_purge"
    title = "Purge archived notes"
    description = (
        "Permanently delete EVERY archived note in an authorized workspace. Irreversible. The "
        "user must approve on this server's own web page (URL-mode elicitation): the client "
        "must declare elicitation with url mode, open the URL for the user, then retry with "
        "accept. Notes edited or restored after the request are kept."
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
            "kept": {"type": "array", "items": {"type": "object"}},
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

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        if not allows_url_elicitation(ctx.capabilities):
            raise MissingCapability(
                "This tool needs approval on the server's own page: the request must declare "
                "the elicitation capability with url mode",
                {"requiredCapabilities": {"elicitation": {"url": {}}}},
            )
        if (ctx.input_responses is None) != (ctx.request_state is None):
            raise InvalidParams(
                "Invalid params: inputResponses and requestState must come together"
            )
        if ctx.request_state is None:
            return self.ask(ctx, args)
        claims = self.verify(ctx, args)
        answer = (ctx.input_responses or {}).get(self.action.input_key)
        kind = answer.get("action") if isinstance(answer, dict) else None
        if kind == "cancel":
            return self.close(ctx, args, claims, "cancelled")
        if kind == "decline":
            return self.close(ctx, args, claims, "declined")
        if kind == "accept":
            return self.accept_purge(ctx, args, claims)
        raise InvalidParams(INVALID_ANSWER)

    # -- round 1 --------------------------------------------------------------------------

    def ask(self, ctx: CallContext, args: dict[str, Any]) -> InputRequired:
        from notes_server.store import approvals
        from notes_server.store.engine import write_tx

        approval_id = "pa-" + secrets.token_hex(16)
        secret = secrets.token_urlsafe(32)
        now = self.services.clock()
        with write_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            found = approvals.archived_notes(conn, workspace.uri)
            if not found:
                raise ToolFailure("No archived notes in this workspace: nothing to purge.")
            items = [(note.id, note.version, note.title) for note in found]
            approvals.prune(conn, expired_before=now)
            approvals.create(
                conn,
                approval_id=approval_id,
                principal=ctx.principal,
                workspace=workspace.uri,
                link_hash=link_hash(secret),
                items=items,
                set_digest=set_digest(items),
                now=now,
                expires_at=now + APPROVAL_TTL,
            )
        payload = {"pa": approval_id, "sd": set_digest(items), "k": secret, "cnt": len(items)}
        return self.ask_again(ctx, workspace.uri, payload)

    def ask_again(self, ctx: CallContext, workspace: str, payload: dict[str, Any]) -> InputRequired:
        """The URL elicitation for a pending approval (same URL on every round)."""
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
        params = {"mode": "url", "message": message, "url": url, "elicitationId": payload["pa"]}
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
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            approval = approvals.get(conn, claims.payload["pa"])
        self.check_binding(ctx, approval, claims)
        assert approval is not None  # check_binding refuses a missing row
        if approval.approved_at is None:
            return self.ask_again(ctx, approval.workspace, dict(claims.payload))
        return self.purge(ctx, args, claims)

    def check_binding(self, ctx: CallContext, approval: Approval | None, claims: Claims) -> None:
        """The row must be the one this state names, for this principal and set."""
        if approval is None:
            raise StateRejected("approval no longer exists (used, declined or expired)")
        if approval.principal != ctx.principal or approval.set_digest != claims.payload["sd"]:
            raise StateRejected("approval does not match the state")
        if approval.expires_at <= self.services.clock():
            raise StateRejected("approval expired")

    def purge(self, ctx: CallContext, args: dict[str, Any], claims: Claims) -> ToolResult:
        from notes_server.store import approvals, nonces
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            nonces.lock(conn, claims.nonce)  # racing answers queue here first (PostgreSQL)
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            approval = approvals.get(conn, claims.payload["pa"])
            self.check_binding(ctx, approval, claims)
            assert approval is not None and approval.approved_at is not None
            now = self.services.clock()
            purged, kept = self.delete_unchanged(conn, ctx, workspace.uri, approval, claims, now)
            result = self.finished("purged", purgedCount=len(purged), purgedIds=purged, kept=kept)
            self.claim(conn, ctx, claims, "purged", claims.payload["sd"], result, now)
            self.services.checkpoint("purge.claimed")
            approvals.discard(conn, approval.id)
        return result

    def delete_unchanged(
        self,
        conn: Connection,
        ctx: CallContext,
        workspace: str,
        approval: Approval,
        claims: Claims,
        now: datetime,
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Delete each bound note still archived at its bound version; report the others."""
        from notes_server.store import notes

        purged: list[str] = []
        kept: list[dict[str, Any]] = []
        for note_id, version, title in approval.items:
            note = notes.get_note(conn, workspace, note_id)
            if note is None:
                kept.append({"noteId": note_id, "title": title, "reason": "gone"})
            elif not note.archived:
                kept.append({"noteId": note_id, "title": note.title, "reason": "restored"})
            elif note.version != version or not notes.delete_note(conn, note):
                kept.append({"noteId": note_id, "title": note.title, "reason": "changed"})
            else:
                purged.append(note_id)
                self.audit(conn, ctx, workspace, "purged", note, claims, note.title, now)
        return purged, kept

    def close(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, outcome: str
    ) -> ToolResult:
        """Decline or cancel: nothing is deleted; the approval is dropped and the answer
        audited once (the nonce claim makes a second answer to the same state fail)."""
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
