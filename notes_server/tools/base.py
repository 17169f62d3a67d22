"""What a tool is: its wire description, and what a call receives and returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from notes_server.jsontext import dump_text
from notes_server.security.uri import WorkspaceUri

if TYPE_CHECKING:
    from notes_server.tools.services import Services

RequestId = str | int
# Where a tool's progress goes: (progress, total or None, message or None). The transport
# builds it when the request carries `_meta.progressToken`; it never raises.
ProgressSink = Callable[[float, float | None, str | None], None]
# Where a tool's log messages go: (level, data, logger). Built only when the request set
# `_meta["io.modelcontextprotocol/logLevel"]` (a 2025-11-25 session: `logging/setLevel`); it
# drops what is below that level and never raises.
LogSink = Callable[[str, Any, str], None]
# A tool's `task_support`: whether a call may run as a task of the `io.modelcontextprotocol/tasks`
# extension when the request declares it ("forbidden": never; "optional": the server runs the
# call as a task whenever the request declares the extension; "required": only as a task, a
# request without the extension is refused with -32021).
TASK_SUPPORT = ("forbidden", "optional", "required")
# Input rounds a call running as a task may ask for before it is failed (a loop, not a user).
MAX_INPUT_ROUNDS = 8


# The records of a call are NamedTuples: immutable like frozen dataclasses, cheaper to build on
# every call, and nothing to compile at start (a dataclass compiles its methods at import).
class CallContext(NamedTuple):
    """Everything a tool may know about the caller, taken from this request alone."""

    principal: str
    capabilities: dict[str, Any]
    request_id: RequestId
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    # The client's roots (a 2025-11-25 session that declared them): the call may touch only
    # granted workspaces at or below one of these. None: no roots, the grants alone decide.
    roots: tuple[WorkspaceUri, ...] | None = None
    progress: ProgressSink | None = None
    log: LogSink | None = None

    def log_message(self, level: str, data: Any, logger: str = "notes") -> None:
        """Tell the client something worth knowing (a `notifications/message` on this request's
        stream); nothing happens unless it asked for log messages at `level` or below. Never
        secrets or another principal's paths, and note content only at "debug"."""
        if self.log is not None:
            self.log(level, data, logger)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the client how far the call is; nothing happens when it did not ask."""
        if self.progress is not None:
            self.progress(progress, total, message)


class ToolResult(NamedTuple):
    """A complete tools/call result."""

    structured: dict[str, Any] | None
    text: str | None = None
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        text = self.text
        if text is None:
            text = dump_text(self.structured)
        result: dict[str, Any] = {
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "isError": self.is_error,
        }
        if self.structured is not None:
            result["structuredContent"] = self.structured
        return result


class InputRequired(NamedTuple):
    """Round 1 of a multi round-trip request: what to ask, and the sealed state to echo."""

    input_requests: dict[str, Any]
    request_state: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "resultType": "input_required",
            "inputRequests": self.input_requests,
            "requestState": self.request_state,
        }


class TaskControl(Protocol):
    """What work running as a task gets: where its progress goes (the task's row) and whether
    it was asked to stop (`tasks/cancel`, looked at between units of work)."""

    def report(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Record progress; never raises."""

    def is_set(self) -> bool:
        """True once cancellation was requested: finish the current unit, commit, return."""

    def request_input(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Ask the client (the task's `input_required` status: `inputRequests`, by key, as a
        multi round-trip request words them) and wait until every key is answered through
        `tasks/update`, at any instance; the answers by key. Raises InputAbandoned when the
        task is cancelled or expires first."""


class InputAbandoned(Exception):
    """The input a task asked for will never come: it was cancelled, or it expired."""


# The long part of a call that runs as a task: called on a worker thread with its control.
TaskWork = Callable[[TaskControl], "ToolResult"]


def tool_hints(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> dict[str, Any]:
    return {
        "title": title,
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": False,
    }


class Tool(ABC):
    """One MCP tool. Subclasses declare their schemas as class attributes."""

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]
    output_schema: ClassVar[dict[str, Any] | None] = None
    tool_annotations: ClassVar[dict[str, Any]]
    # See TASK_SUPPORT. A tool that may ask for input (MRTR) and allows tasks overrides
    # `start_task` to ask through its TaskControl (`request_input`) or before the task.
    task_support: ClassVar[str] = "forbidden"

    def __init__(self, services: Services) -> None:
        self.services = services

    def runs_on_loop(self) -> bool:
        """True when a call is a bounded local read (one row by key, after the grant check):
        HTTP then runs it on the event loop, where a worker-thread hand-off would cost more
        than the work. Never for anything that can wait on a lock, a network or a slow scan."""
        return False

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        entry["annotations"] = self.tool_annotations
        return entry

    def start_task(self, ctx: CallContext, args: dict[str, Any]) -> TaskWork | InputRequired:
        """Run as a task: check now what can fail at once (raise McpError / ToolFailure, so the
        client gets its answer instead of a failed task), and return the long part; or, for a
        multi round-trip call whose input is gathered before the task exists, this round's
        InputRequired (the task starts on the last round). The default defers the whole
        call, its progress going to the task."""
        return self.answering(ctx, args, None)

    def answering(
        self, ctx: CallContext, args: dict[str, Any], first: ToolResult | InputRequired | None
    ) -> TaskWork:
        """The work of a call that may ask for input as a task: each InputRequired round of
        `call` (or `first`, a round already run) becomes the task's `input_required` status
        through `control.request_input`, and the answers are handed to `call` again with that
        round's requestState, exactly as a client's retry would be: the same verification of
        the sealed state, the same transaction. At most MAX_INPUT_ROUNDS rounds."""

        def work(control: TaskControl) -> ToolResult:
            here = ctx._replace(progress=control.report)
            outcome = first if first is not None else self.call(here, args)
            for _ in range(MAX_INPUT_ROUNDS):
                if not isinstance(outcome, InputRequired):
                    return outcome
                answers = control.request_input(outcome.input_requests)
                retry = here._replace(input_responses=answers, request_state=outcome.request_state)
                outcome = self.call(retry, args)
            if isinstance(outcome, InputRequired):
                raise RuntimeError(
                    f"{self.name} asked for input more than {MAX_INPUT_ROUNDS} times"
                )
            return outcome

        return work

    @abstractmethod
    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        """Run the tool; raise ToolFailure for an isError result, McpError for protocol errors."""
