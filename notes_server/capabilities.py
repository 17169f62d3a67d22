"""Reading client capabilities as declared on one request. Pure; used by protocol and tools."""

from __future__ import annotations

from typing import Any


def allows_form_elicitation(capabilities: dict[str, Any]) -> bool:
    """`elicitation: {}` means form-only; `{"form": {}}` is explicit; url-only is not enough."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return False
    if not elicitation:
        return True
    return isinstance(elicitation.get("form"), dict)
