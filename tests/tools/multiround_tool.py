"""A test-only multi round-trip tool shaped like the URL-mode purge (issue 16), loaded with the
`--tools-module` mechanism. It shows that a second multi-round tool needs nothing but the
request-state boundary (`Services.states`): it never seals, opens or compares claims itself.

Round 1 binds a set of ids and a pending-approval id to the state (phase `sweep/approve`).
Round 2 without an `accept` asks again with a state in phase `sweep/wait`; with one, it reports
what the verified state carried.
"""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from notes_server.tools.base import CallContext, InputRequired, Tool, ToolResult, tool_hints

INPUT_KEY = "sweep_ok"
PHASES = ("sweep/approve", "sweep/wait")
ASK: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Approve the sweep?",
        "requestedSchema": {"type": "object", "properties": {}},
    },
}


class Sweep(Tool):
    name = "test_sweep"
    title = "Sweep (test only)"
    description = "A two-round test tool that binds ids and an approval id to its state."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "workspaceUri": {"type": "string"},
            "ids": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["workspaceUri", "ids"],
        "additionalProperties": False,
    }
    tool_annotations = tool_hints("Sweep", read_only=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        if ctx.request_state is None:
            payload = {"ids": sorted(args["ids"]), "approval": "pa-" + secrets.token_hex(8)}
            return self.ask(ctx, args, PHASES[0], payload)
        claims = self.services.states.verify(
            ctx.request_state,
            principal=ctx.principal,
            tool=self.name,
            phases=PHASES,
            arguments=args,
        )
        answer = (ctx.input_responses or {}).get(INPUT_KEY)
        if not isinstance(answer, dict) or answer.get("action") != "accept":
            return self.ask(ctx, args, PHASES[1], dict(claims.payload))
        return ToolResult({**claims.payload, "phase": claims.phase, "nonce": claims.nonce})

    def ask(
        self, ctx: CallContext, args: dict[str, Any], phase: str, payload: dict[str, Any]
    ) -> InputRequired:
        state = self.services.states.issue(
            principal=ctx.principal, tool=self.name, phase=phase, arguments=args, payload=payload
        )
        return InputRequired({INPUT_KEY: ASK}, state)


TOOLS = [Sweep]
