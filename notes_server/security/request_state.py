"""The request-state boundary shared by every multi round-trip tool.

A tool that asks the client something in round 1 and acts in round 2 keeps nothing between the
rounds: what it must trust in round 2 travels sealed in ``requestState`` (``security/state.py``
seals it). This module decides what such a state says and when it may be believed, so no tool
ever opens or checks a state itself:

- ``issue`` binds a state to the principal, the method (``tools/call``), the tool, the phase,
  a digest of the tool's arguments, this server's audience, an expiry and a fresh nonce, plus a
  small tool-specific payload;
- ``verify`` opens a state and checks every binding against the request at hand, returning
  ``Claims`` or raising one ``StateRejected`` (-32602 "Invalid or expired requestState"). The
  precise reason travels on the exception for the log, never to the wire.

Inside the token the claims are flat JSON (``p m t ph a aud n iat exp`` plus the payload's own
names), so the payload may not use those names.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from notes_server.errors import StateRejected
from notes_server.security.state import StateError, StateSealer

__all__ = [
    "METHOD",
    "RESERVED_CLAIMS",
    "TRANSPORT_FIELDS",
    "Claims",
    "RequestStates",
    "StateRejected",
    "argument_digest",
]

METHOD = "tools/call"
RESERVED_CLAIMS = frozenset({"p", "m", "t", "ph", "a", "aud", "n", "iat", "exp"})
# Request fields that belong to the round trip, not to the tool's input: never digested.
TRANSPORT_FIELDS = frozenset({"_meta", "inputResponses", "requestState"})


def argument_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the tool's arguments,
    minus transport-only fields: round 2 must repeat round 1's arguments exactly."""
    material = {key: value for key, value in arguments.items() if key not in TRANSPORT_FIELDS}
    text = json.dumps(
        material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Claims:
    """A verified state: every field below has been checked against the current request."""

    principal: str
    tool: str
    phase: str
    digest: str
    audience: str
    nonce: str
    issued_at: int
    expires_at: int
    payload: Mapping[str, Any]
    method: str = METHOD


class RequestStates:
    """Issues and verifies bound ``requestState`` tokens for one server (one audience).

    The audience names the deployment (``Settings.state_audience``), so a state issued by
    another deployment that happens to share the keys is refused."""

    def __init__(self, sealer: StateSealer, *, audience: str, ttl: float) -> None:
        if not isinstance(audience, str) or not audience:
            raise ValueError("the state audience must be a non-empty string")
        self._sealer = sealer
        self._audience = audience
        self._ttl = ttl

    @property
    def audience(self) -> str:
        return self._audience

    def issue(
        self,
        *,
        principal: str,
        tool: str,
        phase: str,
        arguments: Mapping[str, Any],
        payload: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> str:
        """Seal a new state for round 2 of ``tool``; a fresh 128-bit nonce names it. ``ttl``
        (seconds) overrides the server's state lifetime for a step that takes longer."""
        extra = dict(payload or {})
        clash = RESERVED_CLAIMS.intersection(extra)
        if clash:
            raise ValueError(f"payload uses reserved claim names: {sorted(clash)}")
        claims = {
            **extra,
            "p": principal,
            "m": METHOD,
            "t": tool,
            "ph": phase,
            "a": argument_digest(arguments),
            "aud": self._audience,
            "n": secrets.token_hex(16),
        }
        return self._sealer.seal(claims, self._ttl if ttl is None else ttl)

    def verify(
        self,
        token: str,
        *,
        principal: str,
        tool: str,
        phases: Collection[str],
        arguments: Mapping[str, Any],
    ) -> Claims:
        """Open ``token`` and check it was issued here, for this principal, tool, one of
        ``phases`` and exactly these arguments, and has not expired."""
        if isinstance(phases, str):
            raise TypeError("phases must be a collection of phase names, not one string")
        try:
            raw = self._sealer.open(token)
        except StateError as exc:
            raise StateRejected(exc.reason) from None
        expected = {
            "aud": (self._audience, "issued for another audience"),
            "m": (METHOD, "issued for another method"),
            "t": (tool, "issued for another tool"),
            "p": (principal, "issued to another principal"),
            "a": (argument_digest(arguments), "issued for other arguments"),
        }
        for name, (value, reason) in expected.items():
            if raw.get(name) != value:
                raise StateRejected(reason)
        phase = raw.get("ph")
        if not isinstance(phase, str) or phase not in phases:
            raise StateRejected("issued for another phase")
        nonce = raw.get("n")
        if not isinstance(nonce, str) or not nonce:
            raise StateRejected("state has no nonce")
        return Claims(
            principal=principal,
            tool=tool,
            phase=phase,
            digest=raw["a"],
            audience=self._audience,
            nonce=nonce,
            issued_at=raw["iat"],
            expires_at=raw["exp"],
            payload={k: v for k, v in raw.items() if k not in RESERVED_CLAIMS},
        )
