"""Reading client capabilities as declared on one request. Pure; used by protocol and tools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def allows_form_elicitation(capabilities: dict[str, Any]) -> bool:
    """`elicitation: {}` means form-only; `{"form": {}}` is explicit; url-only is not enough."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return False
    if not elicitation:
        return True
    return isinstance(elicitation.get("form"), dict)


# The Tasks extension (2026-07-28, `io.modelcontextprotocol/tasks`).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """The request's client capabilities declare the Tasks extension (an object, `{}` too)."""
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, Mapping):
        return False
    return isinstance(extensions.get(TASKS_EXTENSION), Mapping)
