"""notes_reindex: queue every note of a workspace for the semantic index and embed them now.

What a person asks for after a model change or a bulk import when search should catch up at
once instead of at the background indexer's pace. Long at scale (a few hundred passages a
second here), so with the Tasks extension it runs as a task: progress is the workspace's notes
embedded out of those queued, and a cancel stops between batches (each batch is its own
transaction, so nothing is half-written); what is still queued is left to the background
indexer, which embeds it anyway. Only the workspace's own notes are claimed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from notes_server.tools.base import (
    CallContext,
    TaskControl,
    TaskWork,
    Tool,
    ToolResult,
    tool_hints,
)
from notes_server.tools.scope import authorize
from notes_server.tools.views import WORKSPACE_URI, schema

if TYPE_CHECKING:
    from notes_server.store.indexer import Stop

Report = Callable[[float, "float | None", "str | None"], None]
_COUNT = {"type": "integer", "minimum": 0}
REINDEX_OUTPUT = {
    "type": "object",
    "properties": {
        "queued": _COUNT,
        "embeddedNotes": _COUNT,
        "passages": _COUNT,
        "pending": _COUNT,
        "model": {"type": "string"},
    },
    "required": ["queued", "embeddedNotes", "passages", "pending", "model"],
}


class _Never:
    def is_set(self) -> bool:
        return False


class Reindex(Tool):
    name = "notes_reindex"
    title = "Re-embed a workspace for semantic search"
    description = (
        "Queue every note of the workspace for the semantic index and embed them now (after a "
        "model change or a large import). Needs write access. `pending` in the result counts "
        "the notes still queued (taken by the background indexer, or left by a cancel)."
    )
    input_schema = schema({"workspaceUri": WORKSPACE_URI}, ["workspaceUri"])
    output_schema = REINDEX_OUTPUT
    tool_annotations = tool_hints(
        "Re-embed a workspace for semantic search", read_only=False, idempotent=True
    )
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        workspace = self._authorized(ctx, args)
        return self._reindex(workspace, ctx.report_progress, _Never())

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork:
        """The grant is checked before the task exists (a refusal is the call's own answer)."""
        workspace = self._authorized(ctx, args)

        def work(control: TaskControl) -> ToolResult:
            return self._reindex(workspace, control.report, control)

        return work

    def _authorized(self, ctx: CallContext, args: dict[str, Any]) -> str:
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            return authorize(conn, ctx, args["workspaceUri"], write=True).uri

    def _reindex(self, workspace: str, report: Report, stop: Stop) -> ToolResult:
        from notes_server.store import indexer, semantic
        from notes_server.store.engine import read_tx, write_tx

        engine = self.services.engine
        embedder = self.services.embedder()
        with write_tx(engine) as conn:
            queued = semantic.enqueue(conn, workspace)
        embedded = 0

        def advance(notes: int, _passages: int) -> None:
            nonlocal embedded
            embedded += notes
            report(embedded, queued, f"{embedded} of {queued} notes embedded")

        report(0, queued, f"{queued} notes queued")
        passages = indexer.drain(engine, embedder, advance, stop, workspace)
        with read_tx(engine) as conn:
            waiting = semantic.pending(conn, workspace)
        return ToolResult(
            {
                "queued": queued,
                "embeddedNotes": embedded,
                "passages": passages,
                "pending": waiting,
                "model": embedder.model,
            }
        )
