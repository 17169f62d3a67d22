"""Behaviour of the request-state boundary: what a state binds, and every way it is refused.

Each refusal is one `StateRejected` with the fixed -32602 wire message; the specific reason
rides on the exception for the log only.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from notes_server.config import Settings, SettingsError, build_settings
from notes_server.errors import StateRejected, to_wire
from notes_server.security.keyring import KeyRing, StateKey
from notes_server.security.request_state import Claims, RequestStates
from notes_server.security.state import StateSealer

T0 = 1_700_000_000
TTL = 120
AUDIENCE = "notes-server/deployment-a"
ARGS: dict[str, Any] = {"workspaceUri": "file:///home/alice/notes", "ids": ["n1", "n2"]}
PAYLOAD: dict[str, Any] = {"ids": [["n1", 3], ["n2", 1]], "approval": "pa-42"}
WIRE = {"code": -32602, "message": "Invalid or expired requestState"}


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def key(kid: str, fill: int) -> StateKey:
    return StateKey(kid=kid, secret=bytes([fill]) * 32)


OLD, NEW = key("old", 1), key("new", 2)


def boundary(
    *keys: StateKey, clock: FakeClock | None = None, audience: str = AUDIENCE
) -> RequestStates:
    sealer = StateSealer(KeyRing(keys or (OLD,)), clock=clock or FakeClock())
    return RequestStates(sealer, audience=audience, ttl=TTL)


def issue(states: RequestStates, **overrides: Any) -> str:
    fields: dict[str, Any] = {
        "principal": "alice",
        "tool": "notes_purge",
        "phase": "purge/approve",
        "arguments": ARGS,
        "payload": PAYLOAD,
    }
    return states.issue(**{**fields, **overrides})


def verify(states: RequestStates, token: str, **overrides: Any) -> Claims:
    fields: dict[str, Any] = {
        "principal": "alice",
        "tool": "notes_purge",
        "phases": ("purge/approve",),
        "arguments": ARGS,
    }
    return states.verify(token, **{**fields, **overrides})


def rejected(states: RequestStates, token: Any, **overrides: Any) -> str:
    """The logged reason of a refusal, after checking that the wire never sees it."""
    with pytest.raises(StateRejected) as info:
        verify(states, token, **overrides)
    exc = info.value
    assert to_wire(exc) == WIRE
    assert str(exc) == WIRE["message"]
    assert exc.reason and exc.reason != str(exc)
    return exc.reason


def forge(k: StateKey, claims: dict[str, Any]) -> str:
    """A correctly sealed token around claims the boundary itself would never issue."""
    nonce = os.urandom(12)
    plaintext = json.dumps(claims).encode()
    sealed = nonce + AESGCM(k.secret).encrypt(
        nonce, plaintext, b"notes-server/state/v1|" + k.kid.encode()
    )
    return f"v1.{k.kid}." + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()


def good_claims(**overrides: Any) -> dict[str, Any]:
    claims = {
        "p": "alice",
        "m": "tools/call",
        "t": "notes_purge",
        "ph": "purge/approve",
        "a": verify(boundary(), issue(boundary())).digest,
        "aud": AUDIENCE,
        "n": "ab" * 16,
        "iat": T0,
        "exp": T0 + TTL,
    }
    return {**claims, **overrides}


# --- issue -> verify ------------------------------------------------------------------------


def test_a_state_verifies_for_the_request_it_was_issued_for() -> None:
    states = boundary()

    claims = verify(states, issue(states))

    assert claims.principal == "alice"
    assert claims.method == "tools/call"
    assert claims.tool == "notes_purge"
    assert claims.phase == "purge/approve"
    assert claims.audience == AUDIENCE
    assert (claims.issued_at, claims.expires_at) == (T0, T0 + TTL)
    assert claims.payload == PAYLOAD
    assert len(claims.nonce) == 32 and int(claims.nonce, 16) >= 0
    assert len(claims.digest) == 64


def test_every_issued_state_carries_a_fresh_nonce() -> None:
    states = boundary()

    nonces = {verify(states, issue(states)).nonce for _ in range(20)}

    assert len(nonces) == 20


def test_argument_order_and_transport_fields_do_not_change_the_binding() -> None:
    states = boundary()
    token = issue(states)
    reordered = dict(reversed(list(ARGS.items())))
    with_transport = {**ARGS, "_meta": {"progressToken": 7}, "requestState": "x"}

    assert verify(states, token, arguments=reordered).payload == PAYLOAD
    assert verify(states, token, arguments=with_transport).payload == PAYLOAD


def test_a_state_verifies_in_any_of_the_accepted_phases() -> None:
    states = boundary()
    token = issue(states, phase="purge/wait")

    claims = verify(states, token, phases=("purge/approve", "purge/wait"))

    assert claims.phase == "purge/wait"


# --- each binding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"principal": "mallory"}, "issued to another principal"),
        ({"tool": "notes_delete"}, "issued for another tool"),
        ({"phases": ("purge/done",)}, "issued for another phase"),
        ({"arguments": {**ARGS, "ids": ["n1"]}}, "issued for other arguments"),
        ({"arguments": {**ARGS, "extra": None}}, "issued for other arguments"),
    ],
)
def test_a_state_for_another_request_is_refused(override: dict[str, Any], reason: str) -> None:
    states = boundary()

    assert rejected(states, issue(states), **override) == reason


def test_a_state_issued_by_another_deployment_with_the_same_keys_is_refused() -> None:
    ours, theirs = boundary(audience=AUDIENCE), boundary(audience="notes-server/deployment-b")

    assert rejected(ours, issue(theirs)) == "issued for another audience"


def test_a_state_sealed_for_another_method_is_refused() -> None:
    token = forge(OLD, good_claims(m="resources/read"))

    assert rejected(boundary(), token) == "issued for another method"


@pytest.mark.parametrize("nonce", [None, "", 12])
def test_a_state_without_a_usable_nonce_is_refused(nonce: Any) -> None:
    claims = good_claims(n=nonce)
    if nonce is None:
        del claims["n"]

    assert rejected(boundary(), forge(OLD, claims)) == "state has no nonce"


def test_a_well_formed_forged_state_verifies_only_because_it_is_sealed_with_our_key() -> None:
    """The control for the forged-claims tests above: their only defect is the one named."""
    assert verify(boundary(), forge(OLD, good_claims())).nonce == "ab" * 16
    assert rejected(boundary(), forge(key("old", 9), good_claims())) == "authentication failed"


def test_phases_given_as_one_string_are_a_programming_error_not_a_substring_match() -> None:
    states = boundary()
    token = issue(states, phase="purge")

    with pytest.raises(TypeError):
        verify(states, token, phases="purge/approve")


def test_a_payload_may_not_shadow_a_binding_claim() -> None:
    with pytest.raises(ValueError, match="reserved"):
        issue(boundary(), payload={"p": "mallory"})


# --- the envelope -------------------------------------------------------------------------


def _mangled(token: str, how: str) -> Any:
    version, kid, body = token.split(".")
    flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
    return {
        "not a string": 42,
        "bad encoding": f"{version}.{kid}.{body[:-1]}!",
        "unknown key id": f"{version}.nokey.{body}",
        "auth tag failure": f"{version}.{kid}.{flipped}",
        "wrong version": f"v2.{kid}.{body}",
        "too few parts": f"{kid}.{body}",
    }[how]


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("not a string", "state is not a string"),
        ("bad encoding", "bad base64url"),
        ("unknown key id", "unknown key id"),
        ("auth tag failure", "authentication failed"),
        ("wrong version", "unsupported state version"),
        ("too few parts", "state is malformed"),
    ],
)
def test_a_damaged_state_is_refused(how: str, reason: str) -> None:
    states = boundary()

    assert rejected(states, _mangled(issue(states), how)) == reason


def test_a_state_expires_after_its_ttl_by_the_injected_clock() -> None:
    clock = FakeClock()
    states = boundary(clock=clock)
    token = issue(states)

    clock.now = T0 + TTL - 1
    assert verify(states, token).expires_at == T0 + TTL
    clock.now = T0 + TTL
    assert rejected(states, token) == "expired"


def test_a_state_issued_with_its_own_lifetime_expires_by_it() -> None:
    clock = FakeClock()
    states = boundary(clock=clock)
    token = issue(states, ttl=TTL * 10)

    clock.now = T0 + TTL
    assert verify(states, token).expires_at == T0 + TTL * 10
    clock.now = T0 + TTL * 10
    assert rejected(states, token) == "expired"


def test_a_state_from_the_future_is_refused() -> None:
    clock = FakeClock(T0 + 3600)
    token = issue(boundary(clock=clock))

    clock.now = T0
    assert rejected(boundary(clock=clock), token) == "issued in the future"


def test_a_state_sealed_with_the_old_key_verifies_once_that_key_is_second_in_the_ring() -> None:
    token = issue(boundary(OLD))
    rotated = boundary(NEW, OLD)

    assert verify(rotated, token).payload == PAYLOAD
    assert issue(rotated).startswith("v1.new.")
    assert rejected(boundary(NEW), token) == "unknown key id"


# --- the audience of a deployment ---------------------------------------------------------


def test_the_audience_names_the_database_not_its_spelling_or_credentials(tmp_path: Any) -> None:
    def audience(url: str) -> str:
        return Settings(db_url=url).state_audience

    db = tmp_path / "notes.db"
    assert audience(f"sqlite:///{db}") == audience(f"sqlite+pysqlite:///{db}")
    assert audience(f"sqlite:///{db}") != audience(f"sqlite:///{tmp_path / 'other.db'}")
    pg = "postgresql+psycopg://{}@db.example/notes"
    assert audience(pg.format("app:s3cret")) == audience(pg.format("ro:other"))
    assert "s3cret" not in audience(pg.format("app:s3cret"))
    assert audience(pg.format("app:s3cret")) != audience("postgresql+psycopg://db.example/other")


def test_a_configured_audience_lets_deployments_on_differently_spelled_urls_share_states(
    tmp_path: Any,
) -> None:
    env = {"NOTES_SERVER_STATE_AUDIENCE": "notes-prod.eu-1"}
    one = build_settings(db="postgresql+psycopg://app@10.0.0.5/notes", env=env)
    two = build_settings(db="postgresql+psycopg://app@db.internal/notes", env=env)
    derived = build_settings(db="postgresql+psycopg://app@db.internal/notes", env={})

    assert one.state_audience == two.state_audience == "notes-prod.eu-1"
    assert derived.state_audience != "notes-prod.eu-1"


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "naïve", "semi;colon"])
def test_a_malformed_configured_audience_is_a_settings_error(bad: str) -> None:
    with pytest.raises(SettingsError, match=r"^NOTES_SERVER_STATE_AUDIENCE: expected"):
        build_settings(db="sqlite:////tmp/n.db", env={"NOTES_SERVER_STATE_AUDIENCE": bad})
