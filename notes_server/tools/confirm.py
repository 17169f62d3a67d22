"""Confirmed destructive actions over multi round-trip requests (MRTR).

Round 1 finds candidates inside the authorized workspace and returns `input_required` with a
form elicitation and a requestState issued by the request-state boundary
(`security.request_state`) with the candidates as its payload. Round 2 has the boundary verify
the state (key, expiry, audience, principal, tool, phase, argument digest), validates the answer
against the form that was asked, and runs ONE write transaction: refuse a consumed nonce,
re-authorize, re-check the live note, claim the nonce, mutate, audit, commit. Any failure inside
rolls the whole transaction back, nonce claim included.

Run as a task (the request declares the Tasks extension), the same rounds happen inside the
task: round 1 runs before the task exists (authorization, candidates, the sealed state: a
refusal is the call's answer), its question becomes the task's `inputRequests`, and the answer
given through `tasks/update` is handed to round 2 with that sealed state, exactly as a client's
retry is (`Tool.answering`): the same verification, the same one transaction with the nonce
claim. The sealed state never leaves the server on this path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from notes_server.errors import InvalidParams, StateRejected, ToolFailure
from notes_server.tools.base import CallContext, InputRequired, TaskWork, Tool, ToolResult
from notes_server.tools.confirm_form import (
    INVALID_CONFIRMATION,
    MAX_CANDIDATES,
    Action,
    answer_digest,
    chosen_note,
    form_message,
    form_schema,
    output_schema_for,
    require_form_elicitation,
    said_no,
)
from notes_server.tools.scope import authorize, contain
from notes_server.tools.titles import clean_title
from notes_server.tools.views import TITLE, WORKSPACE_URI, schema

__all__ = ["Action", "ConfirmedAction", "output_schema_for"]

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.security.request_state import Claims
    from notes_server.store.notes import NoteRecord

PRUNE_MARGIN = timedelta(minutes=10)


class ConfirmedAction(Tool):
    """Base for tools that change a note only after the user picks it and confirms."""

    action: ClassVar[Action]
    input_schema = schema(
        {"workspaceUri": WORKSPACE_URI, "title": TITLE}, ["workspaceUri", "title"]
    )

    # A request declaring the Tasks extension runs as a task whose input is the confirmation.
    task_support = "optional"

    def apply(self, conn: Connection, note: NoteRecord, now: datetime, principal: str) -> bool:
        """Perform the mutation on the live row (`principal`: who confirmed it, for the
        history); False if the row changed underneath."""
        raise NotImplementedError

    # -- round dispatch -------------------------------------------------------------------

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        """Round 1 asks; a retry is verified, then its answer is handed to `respond`."""
        self.require_capability(ctx.capabilities)
        if (ctx.input_responses is None) != (ctx.request_state is None):
            raise InvalidParams(
                "Invalid params: inputResponses and requestState must come together"
            )
        if ctx.request_state is None:
            return self.ask(ctx, args)
        claims = self.verify(ctx, args)
        answer = (ctx.input_responses or {}).get(self.action.input_key)
        return self.respond(ctx, args, claims, answer)

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork | InputRequired:
        """Round 1 now (or, for a client's own retry, its verification now); the rest, and
        every later question, in the task."""
        self.require_capability(ctx.capabilities)
        if (ctx.input_responses is None) != (ctx.request_state is None):
            raise InvalidParams(
                "Invalid params: inputResponses and requestState must come together"
            )
        if ctx.request_state is None:
            return self.answering(ctx, args, self.ask(ctx, args))
        self.verify(ctx, args)  # a forged or stale state is refused at once, not as a task
        return self.answering(ctx, args, None)

    def require_capability(self, capabilities: dict[str, Any]) -> None:
        """Refuse (-32021) a request that cannot receive this tool's question: a form here."""
        require_form_elicitation(capabilities)

    def respond(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, answer: Any
    ) -> ToolResult | InputRequired:
        """The verified retry's answer: none asks again; cancel, decline (or a "no"), accept."""
        if answer is None:
            return self.ask(ctx, args)
        kind = answer.get("action") if isinstance(answer, dict) else None
        if kind == "cancel":
            return self.cancel(claims)
        if kind == "decline" or (kind == "accept" and said_no(answer)):
            return self.decline(ctx, args, claims)
        if kind == "accept":
            return self.accept(ctx, args, claims, chosen_note(answer, claims.payload))
        raise InvalidParams(INVALID_CONFIRMATION)

    # -- round 1 --------------------------------------------------------------------------

    def ask(self, ctx: CallContext, args: dict[str, Any]) -> InputRequired:
        from notes_server.store import notes
        from notes_server.store.engine import read_tx

        title = clean_title(args["title"], self.action.tool)
        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            shown, found = notes.find_candidates(conn, workspace.uri, title, limit=MAX_CANDIDATES)
        if not shown:
            raise ToolFailure(
                f"No matching note in this workspace: no note title contains "
                f"{title!r}, so there is nothing to {self.action.verb}. "
                "Use notes_search to find the note's title."
            )
        state = self.services.states.issue(
            principal=ctx.principal,
            tool=self.action.tool,
            phase=self.action.phase,
            arguments=self.bound_arguments(workspace.uri, args),
            payload={"c": [[note.id, note.version] for note in shown]},
        )
        request = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": form_message(self.action, title, workspace.uri, shown, found),
                "requestedSchema": form_schema(self.action, shown),
            },
        }
        return InputRequired({self.action.input_key: request}, state)

    # -- round 2 --------------------------------------------------------------------------

    @staticmethod
    def bound_arguments(workspace: str, args: dict[str, Any]) -> dict[str, Any]:
        """What the state binds: the workspace in canonical form (another spelling of the same
        workspace confirms the same request) and the title exactly as sent."""
        return {"workspaceUri": workspace, "title": args["title"]}

    def verify(self, ctx: CallContext, args: dict[str, Any]) -> Claims:
        """Have the boundary verify the state for this request; check the candidates payload."""
        from notes_server.security.uri import parse_workspace_argument

        try:
            workspace = parse_workspace_argument(args["workspaceUri"]).uri
        except ValueError:
            raise StateRejected("workspace no longer parses") from None
        claims = self.services.states.verify(
            ctx.request_state or "",
            principal=ctx.principal,
            tool=self.action.tool,
            phases=(self.action.phase,),
            arguments=self.bound_arguments(workspace, args),
        )
        if not self.payload_complete(claims.payload):
            raise StateRejected("state payload is incomplete")
        return claims

    @staticmethod
    def payload_complete(payload: Mapping[str, Any]) -> bool:
        """Whether a verified state carries what round 2 reads: here, the offered candidates."""
        return isinstance(payload.get("c"), list)

    def finished(self, outcome: str, **extra: Any) -> ToolResult:
        return ToolResult(
            {self.action.flag: outcome == self.action.done, "outcome": outcome, **extra}
        )

    def cancel(self, claims: Claims) -> ToolResult:
        """Touch nothing; but a state whose confirmation was already used is not cancellable."""
        from notes_server.store import nonces
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            if nonces.get(conn, claims.nonce) is not None:
                raise StateRejected("confirmation nonce already consumed")
        return self.finished("cancelled")

    def decline(self, ctx: CallContext, args: dict[str, Any], claims: Claims) -> ToolResult:
        from notes_server.store import nonces
        from notes_server.store.engine import retrying, write_tx

        def transaction() -> ToolResult:
            with write_tx(self.services.engine) as conn:
                nonces.lock(conn, claims.nonce)
                workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
                now = self.services.clock()
                self.claim(conn, ctx, claims, "declined", None, None, now)
                self.audit(conn, ctx, workspace.uri, "declined", None, claims, args["title"], now)
            return self.finished("declined")

        result = retrying(transaction)
        ctx.log_message(
            "notice", f"{self.action.tool}: the user declined; nothing was {self.action.done}"
        )
        return result

    def accept(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, note_id: str
    ) -> ToolResult:
        from notes_server.store.engine import retrying

        return retrying(lambda: self.accept_once(ctx, args, claims, note_id))

    def accept_once(
        self, ctx: CallContext, args: dict[str, Any], claims: Claims, note_id: str
    ) -> ToolResult:
        """One attempt of the accept transaction (`accept` retries it on a transient failure)."""
        from notes_server.store import nonces, notes
        from notes_server.store.engine import write_tx

        sealed_version = dict((entry[0], entry[1]) for entry in claims.payload["c"])[note_id]
        digest = answer_digest(note_id)  # pure: computed before the write lock is taken
        with write_tx(self.services.engine) as conn:
            # The nonce decides: racing presentations of one confirmation queue here first.
            nonces.lock(conn, claims.nonce)
            # Re-authorize first: even replaying a recorded outcome needs a live grant.
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            previous = nonces.get(conn, claims.nonce)
            if previous is not None:
                return self.replayed(ctx, previous, note_id)
            note = notes.get_note(conn, workspace.uri, note_id)
            if note is None:
                raise ToolFailure(
                    f"The chosen note no longer exists in this workspace; nothing was "
                    f"{self.action.done}."
                )
            if note.version != sealed_version or note.archived:
                raise ToolFailure(
                    f"The chosen note changed after the confirmation was requested (version "
                    f"{sealed_version} -> {note.version}); nothing was {self.action.done}. "
                    f"Call {self.action.tool} again to confirm the current version."
                )
            uri = contain(workspace, note)
            result = self.finished(self.action.done, noteId=note.id, title=note.title, uri=uri)
            now = self.services.clock()  # one reading for the claim, the mutation and the audit
            self.claim(conn, ctx, claims, self.action.done, digest, result, now)
            self.services.checkpoint(f"{self.action.verb}.claimed")
            if not self.apply(conn, note, now, ctx.principal):
                raise ToolFailure(f"The chosen note changed; nothing was {self.action.done}.")
            self.services.checkpoint(f"{self.action.verb}.applied")
            self.audit(conn, ctx, workspace.uri, self.action.done, note, claims, note.title, now)
            self.services.checkpoint(f"{self.action.verb}.audited")
        self.services.checkpoint(f"{self.action.verb}.committed")
        return result

    def replayed(self, ctx: CallContext, previous: Any, note_id: str) -> ToolResult:
        """An exact repeat of a committed accept returns its recorded outcome; all else fails."""
        same = (
            previous.principal == ctx.principal
            and previous.tool == self.action.tool
            and previous.outcome == self.action.done
            and previous.answer_digest == answer_digest(note_id)
            and previous.result_json is not None
        )
        if not same:
            raise StateRejected("confirmation nonce already consumed")
        structured = json.loads(previous.result_json)
        return ToolResult(structured)

    def claim(
        self,
        conn: Connection,
        ctx: CallContext,
        claims: Claims,
        outcome: str,
        digest: str | None,
        result: ToolResult | None,
        now: datetime,
    ) -> None:
        from notes_server.store import nonces

        nonces.prune(conn, expired_before=now - PRUNE_MARGIN)
        claimed = nonces.claim(
            conn,
            nonce=claims.nonce,
            principal=ctx.principal,
            tool=self.action.tool,
            outcome=outcome,
            answer_digest=digest,
            result_json=None if result is None else json.dumps(result.structured),
            now=now,
            expires_at=datetime.fromtimestamp(claims.expires_at, UTC),
        )
        if not claimed:
            raise StateRejected("confirmation nonce already consumed")

    def audit(
        self,
        conn: Connection,
        ctx: CallContext,
        workspace: str,
        outcome: str,
        note: NoteRecord | None,
        claims: Claims,
        title: str,
        at: datetime,
    ) -> None:
        from notes_server.store import audit

        audit.record(
            conn,
            audit.AuditRecord(
                at=at,
                principal=ctx.principal,
                tool=self.action.tool,
                outcome=outcome,
                workspace=workspace,
                note_id=None if note is None else note.id,
                note_title=title,
                note_path=None if note is None else note.path,
                nonce=claims.nonce,
            ),
        )
