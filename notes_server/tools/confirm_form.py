"""The confirmation form and the rules for reading its answer. Pure: no I/O.

Kept apart from the transaction code in confirm.py: this is what the user sees and what counts
as consent; that is what happens once consent is proven.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from notes_server.capabilities import allows_form_elicitation
from notes_server.errors import InvalidParams, MissingCapability
from notes_server.tools.titles import display_title
from notes_server.tools.views import iso

if TYPE_CHECKING:
    from notes_server.store.notes import NoteRecord

MAX_CANDIDATES = 10
INVALID_CONFIRMATION = "Invalid confirmation: choose one of the offered notes and confirm it"
REQUIRED_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}


@dataclass(frozen=True, slots=True)
class Action:
    """What distinguishes one confirmed action from another; never shared between tools."""

    tool: str
    input_key: str
    phase: str
    verb: str
    flag: str
    done: str
    confirm_title: str


def answer_digest(note_id: str) -> str:
    from hashlib import sha256  # not at start: hashlib loads OpenSSL (~2.5 ms)

    return sha256(json.dumps([note_id, True]).encode()).hexdigest()


def require_form_elicitation(capabilities: dict[str, Any]) -> None:
    if not allows_form_elicitation(capabilities):
        raise MissingCapability(
            "This tool asks the user to confirm in a form: the request must declare the "
            "elicitation capability with form mode",
            {"requiredCapabilities": copy.deepcopy(REQUIRED_CAPABILITIES)},
        )


def output_schema_for(action: Action) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            action.flag: {"type": "boolean"},
            "outcome": {"type": "string", "enum": [action.done, "declined", "cancelled"]},
            "noteId": {"type": "string"},
            "title": {"type": "string"},
            "uri": {"type": "string"},
        },
        "required": [action.flag, "outcome"],
    }


def form_message(
    action: Action, title: str, workspace: str, shown: list[NoteRecord], found: int
) -> str:
    """Say what matched; when not all candidates fit the form, how many were left out and
    how to narrow the list."""
    what = f"{title!r} in {workspace}"
    if found > len(shown):
        count = (
            f"{found} notes match {what}; showing {len(shown)}: exact titles first, then the "
            f"most recently updated. {found - len(shown)} more matched: to see them, call "
            f"{action.tool} again with more of the title."
        )
    elif found == 1:
        count = f"One note matches {what}."
    else:
        count = f"{found} notes match {what}."
    return f"{count} Choose the note to {action.verb} and confirm."


def form_schema(action: Action, shown: list[NoteRecord]) -> dict[str, Any]:
    """A flat form: a titled single-select of the candidates (title, path, last update) and
    an explicit confirmation box, both required."""
    choices = [
        {
            "const": n.id,
            "title": f"{display_title(n.title)} — {n.path} (updated {iso(n.updated_at)})",
        }
        for n in shown
    ]
    return {
        "type": "object",
        "properties": {
            "note_id": {"type": "string", "title": "Note", "oneOf": choices},
            "confirm": {"type": "boolean", "title": action.confirm_title},
        },
        "required": ["note_id", "confirm"],
    }


def said_no(answer: dict[str, Any]) -> bool:
    """An accepted form whose confirmation box is answered "no": the person declined.

    Only the form's own fields may be present and `confirm` must be exactly false; whichever
    note was picked does not matter, since nothing will be done to it."""
    content = answer.get("content")
    return (
        isinstance(content, dict)
        and set(content) <= {"note_id", "confirm"}
        and content.get("confirm") is False
    )


def chosen_note(answer: dict[str, Any], payload: Mapping[str, Any]) -> str:
    """Validate an accept answer against the form that was asked: never infer consent."""
    content = answer.get("content")
    if not isinstance(content, dict) or set(content) != {"note_id", "confirm"}:
        raise InvalidParams(INVALID_CONFIRMATION)
    note_id, confirm = content["note_id"], content["confirm"]
    sealed_ids = {entry[0] for entry in payload["c"]}
    if confirm is not True or not isinstance(note_id, str) or note_id not in sealed_ids:
        raise InvalidParams(INVALID_CONFIRMATION)
    return note_id
