"""The shipped prompts: a weekly review of a workspace, one note's summary, notes related to one.

Each authorizes the workspace exactly as a read-only tool does (grant, then a 2025 session's
roots; -32602 "Workspace is not available" for anything else) and reads live notes only. A
prompt's messages carry the caller's own notes (an embedded resource at its canonical URI, or
titles and paths), never anything outside that workspace.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from notes_server.errors import InvalidParams, UriError
from notes_server.features.prompts.base import (
    Prompt,
    PromptArgument,
    PromptResult,
    resource_message,
    text_message,
)
from notes_server.security.uri import parse_note_path
from notes_server.tools.base import CallContext
from notes_server.tools.completion import (
    Completion,
    bounded,
    complete_paths,
    complete_titles,
    complete_workspaces,
)
from notes_server.tools.scope import authorize, contain
from notes_server.tools.titles import display_title

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.security.uri import WorkspaceUri
    from notes_server.store.notes import NoteRecord
    from notes_server.tools.services import Services

REVIEW_LIMIT = 100
RELATED_LIMIT = 10
REVIEW_DAYS = 7
SINCE_WEEKS = 8
MARKDOWN = "text/markdown"

WORKSPACE = PromptArgument(
    "workspaceUri", "The workspace (its file: URI), as the tools take it", True, complete_workspaces
)


def _since_values(
    services: Services, ctx: CallContext, prefix: str, context: Mapping[str, str]
) -> Completion:
    """The starts (Mondays, ISO dates) of the last few weeks, this week first."""
    today = services.clock().date()
    monday = today - timedelta(days=today.weekday())
    weeks = [(monday - timedelta(weeks=n)).isoformat() for n in range(SINCE_WEEKS)]
    return bounded([week for week in weeks if week.startswith(prefix)])


def _parse_since(text: str | None, services: Services) -> datetime:
    if not text:
        return services.clock() - timedelta(days=REVIEW_DAYS)
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InvalidParams(
            "Invalid arguments for prompt notes_weekly_review: since must be a date (YYYY-MM-DD)"
        ) from None
    return datetime.combine(day, time(), tzinfo=UTC)


def _note_at(conn: Connection, workspace: WorkspaceUri, prompt: str, path: str) -> NoteRecord:
    from notes_server.store import notes

    try:
        canonical = "/".join(parse_note_path(path))
    except UriError as exc:
        raise InvalidParams(f"Invalid arguments for prompt {prompt}: path {exc}") from None
    note = notes.get_note_by_path(conn, workspace.uri, canonical)
    if note is None or note.archived:
        raise InvalidParams(
            f"Invalid arguments for prompt {prompt}: no live note at this path in the workspace"
        )
    return note


class WeeklyReview(Prompt):
    name = "notes_weekly_review"
    title = "Weekly review"
    description = (
        "Review what changed in a workspace since a date (default: the last 7 days): the notes "
        "updated since then, newest first, with a request to summarize and plan follow-ups."
    )
    arguments = (
        WORKSPACE,
        PromptArgument(
            "since", "Start date, YYYY-MM-DD (default: 7 days ago)", False, _since_values
        ),
    )

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        from notes_server.store import lookups
        from notes_server.store.engine import read_tx

        since = _parse_since(args.get("since"), self.services)
        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            rows = lookups.updated_since(conn, workspace.uri, since, REVIEW_LIMIT + 1)
        day = since.date().isoformat()
        lines = [
            f"- {display_title(title)} ({path}, updated {updated.date().isoformat()})"
            for path, title, updated in rows[:REVIEW_LIMIT]
        ]
        if len(rows) > REVIEW_LIMIT:
            lines.append(f"- ... and more; only the {REVIEW_LIMIT} most recent are listed")
        listing = "\n".join(lines) if lines else "(no notes changed)"
        text = (
            f"Weekly review of the notes workspace {workspace.uri} since {day}.\n\n"
            f"Notes updated since then, newest first:\n{listing}\n\n"
            "Read the notes that matter (notes_read, or resources/read at the note's URI), then "
            "summarize what changed, list open questions and decisions, and propose what to "
            "follow up next week."
        )
        ctx.log_message("info", f"weekly review: {len(rows[:REVIEW_LIMIT])} notes since {day}")
        return PromptResult([text_message(text)], f"Weekly review since {day}")


class NoteSummary(Prompt):
    name = "notes_summarize"
    title = "Summarize a note"
    description = "Summarize one note: the note itself embedded as a resource, and the request."
    arguments = (
        WORKSPACE,
        PromptArgument("path", "The note's path in the workspace", True, complete_paths),
    )

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            note = _note_at(conn, workspace, self.name, args["path"])
            uri = contain(workspace, note)
        title = display_title(note.title)
        ask = (
            f"Summarize the note above, \u201c{title}\u201d ({note.path}): its main points, "
            "decisions and open items, in a few bullet points."
        )
        return PromptResult(
            [resource_message(uri, note.body, MARKDOWN), text_message(ask)], f"Summary of {title}"
        )


class RelatedNotes(Prompt):
    name = "notes_related"
    title = "Notes related to a note"
    description = (
        "Find the notes related to one note (chosen by title): the note embedded as a resource, "
        "the best full-text matches for its title in the same workspace, and the request to "
        "explain how they relate."
    )
    arguments = (
        WORKSPACE,
        PromptArgument("title", "The note's title (case does not matter)", True, complete_titles),
    )

    def get(self, ctx: CallContext, args: dict[str, str]) -> PromptResult:
        from notes_server.store import lookups, search
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            note = lookups.note_titled(conn, workspace.uri, args["title"])
            if note is None:
                raise InvalidParams(
                    f"Invalid arguments for prompt {self.name}: no live note with this title "
                    "in the workspace"
                )
            uri = contain(workspace, note)
            hits = search.search(
                conn,
                workspace.uri,
                note.title,
                include_archived=False,
                limit=RELATED_LIMIT + 1,
                offset=0,
            )
            related = [(h, contain(workspace, h.note)) for h in hits if h.note.id != note.id]
        lines = [
            f"- {display_title(h.note.title)} ({h.note.path}, {hit_uri}): {h.snippet}"
            for h, hit_uri in related[:RELATED_LIMIT]
        ]
        listing = "\n".join(lines) if lines else "(no other note matches its title)"
        title = display_title(note.title)
        ask = (
            f"The note above is \u201c{title}\u201d. Notes in the same workspace that match its "
            f"title:\n{listing}\n\nRead the candidates that look relevant and explain how each "
            "relates to this note; say which are not related after all."
        )
        return PromptResult(
            [resource_message(uri, note.body, MARKDOWN), text_message(ask)],
            f"Notes related to {title}",
        )


SHIPPED_PROMPTS: tuple[type[Prompt], ...] = (WeeklyReview, NoteSummary, RelatedNotes)
