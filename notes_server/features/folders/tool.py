"""notes_import: import the markdown folder the operator configured for this workspace.

A client names only the workspace; the folder comes from `notes-server workspace mirror`, so no
request can point the server at a directory of its choosing. Files already imported are left
as they are (a different note at a file's path is skipped and reported, never overwritten).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from notes_server.errors import ToolFailure
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

MAX_PROBLEMS = 100
# Files per transaction of an import running as a task (see ImportOptions.batch).
TASK_BATCH = 25
_COUNT = {"type": "integer", "minimum": 0}


IMPORT_OUTPUT = {
    "type": "object",
    "properties": {
        "imported": _COUNT,
        "unchanged": _COUNT,
        "skipped": _COUNT,
        "refused": _COUNT,
        "problems": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["imported", "unchanged", "skipped", "refused", "problems"],
}
LOG = logging.getLogger("notes_server.import")

if TYPE_CHECKING:
    from notes_server.features.folders.progress import Progress, Stop
    from notes_server.security.uri import WorkspaceUri


class FilesDone:
    """The import's progress as files read out of the files found, for a client that asked
    for progress (counting the files first costs a walk, so only then)."""

    def __init__(self, ctx: CallContext) -> None:
        self.ctx = ctx
        self.total = 0
        self.done = 0

    def start(self, total: int) -> None:
        self.total = total
        self.ctx.report_progress(0, total, f"{total} files to read")

    def advance(self, nbytes: int) -> None:
        self.done += 1
        self.ctx.report_progress(self.done, self.total, f"{self.done} of {self.total} files read")


class TaskFiles:
    """The import's progress into its task: files read out of the files found."""

    def __init__(self, control: TaskControl) -> None:
        self.control = control
        self.total = 0
        self.done = 0

    def start(self, total: int) -> None:
        self.total = total
        self.control.report(0, total, f"{total} files to read")

    def advance(self, nbytes: int) -> None:
        self.done += 1
        self.control.report(self.done, self.total, f"{self.done} of {self.total} files read")


class ImportFolder(Tool):
    name = "notes_import"
    title = "Import notes from the workspace's folder"
    description = (
        "Import the markdown files (*.md, *.markdown, *.txt) of the folder the server's operator "
        "configured for this workspace. Idempotent: files already imported are unchanged; a file "
        "whose path holds a different note is skipped and listed. Symlinks, special files, hard "
        "links, files over 1 MB and unsafe names are refused and listed with a reason."
    )
    input_schema = schema({"workspaceUri": WORKSPACE_URI}, ["workspaceUri"])
    output_schema = IMPORT_OUTPUT
    tool_annotations = tool_hints("Import notes from the workspace's folder", read_only=False)

    # A large folder takes a while: with the Tasks extension the call runs as a task.
    task_support = "optional"

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        workspace, folder = self._folder(ctx, args)
        reported = None if ctx.progress is None else FilesDone(ctx)
        return self._import(ctx, workspace, self._open(folder), reported, None)

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork:
        """The grant and the folder are checked before the task exists (a refusal is the
        call's own answer); the import runs as the task, its progress and cancellation
        between files going through the task's control."""
        workspace, folder = self._folder(ctx, args)
        os.close(self._open(folder))

        def work(control: TaskControl) -> ToolResult:
            fd = self._open(folder)
            return self._import(ctx, workspace, fd, TaskFiles(control), control, TASK_BATCH)

        return work

    def _folder(self, ctx: CallContext, args: dict[str, Any]) -> tuple[WorkspaceUri, str]:
        from notes_server.store import folders
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            folder = folders.mirror_folder(conn, ctx.principal, workspace.uri)
        if folder is None:
            raise ToolFailure(
                "No folder is configured for this workspace; the server's operator can set one "
                "with `notes-server workspace mirror`."
            )
        return workspace, folder

    @staticmethod
    def _open(folder: str) -> int:
        from notes_server.features.folders.walker import FolderError, open_root

        try:
            return open_root(folder)
        except FolderError as exc:
            # The operator's path stays out of the reply; the server log has it.
            LOG.warning("notes_import: %s", exc)
            raise ToolFailure(
                "The folder configured for this workspace cannot be opened (a folder mirrored "
                "after the server started is readable once the server restarts)."
            ) from None

    def _import(
        self,
        ctx: CallContext,
        workspace: WorkspaceUri,
        fd: int,
        reported: Progress | None,
        stop: Stop | None,
        batch: int | None = None,
    ) -> ToolResult:
        # The folder machinery (~4 ms of imports) loads on the first import, not at every start.
        from notes_server.features.folders.importer import BATCH, ImportOptions, import_folder

        options = ImportOptions(principal=ctx.principal, tool=self.name, batch=batch or BATCH)
        try:
            summary = import_folder(
                self.services.engine,
                fd,
                workspace,
                options,
                reported,
                stop,
            )
        finally:
            os.close(fd)
        counts = summary.as_json()
        ctx.log_message(
            "info",
            f"notes_import: {counts['imported']} imported, {counts['unchanged']} unchanged, "
            f"{counts['skipped']} skipped, {counts['refused']} refused",
        )
        return ToolResult(
            {
                "imported": counts["imported"],
                "unchanged": counts["unchanged"],
                "skipped": counts["skipped"],
                "refused": counts["refused"],
                "problems": counts["problems"][:MAX_PROBLEMS],
            }
        )
