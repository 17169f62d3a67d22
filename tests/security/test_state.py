"""Behaviour of sealed ``requestState`` tokens: sealing, tampering, rotation, time, input."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from notes_server.errors import NotesServerError
from notes_server.security.keyring import KeyRing, StateKey
from notes_server.security.state import MAX_STATE_LENGTH, StateError, StateSealer

T0 = 1_700_000_000
CLAIMS: dict[str, Any] = {"tool": "delete_note", "workspace": "ws-1", "path": "a/b.md"}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key(kid: str, fill: int) -> StateKey:
    return StateKey(kid=kid, secret=bytes([fill]) * 32)


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sealer(*keys: StateKey, clock: Callable[[], float] | None = None) -> StateSealer:
    return StateSealer(KeyRing(keys), clock=clock or FakeClock())


def forge(k: StateKey, plaintext: bytes, aad_kid: str | None = None) -> str:
    """Build a correctly authenticated token around an arbitrary payload."""
    nonce = os.urandom(12)
    aad = b"notes-server/state/v1|" + (aad_kid or k.kid).encode("ascii")
    return f"v1.{k.kid}." + b64(nonce + AESGCM(k.secret).encrypt(nonce, plaintext, aad))


def reason_of(s: StateSealer, token: Any) -> str:
    with pytest.raises(StateError) as info:
        s.open(token)
    return info.value.reason


# --- sealing and opening -------------------------------------------------------------------


def test_round_trip_returns_claims_plus_iat_and_exp() -> None:
    s = sealer(key("k1", 1))
    opened = s.open(s.seal(CLAIMS, 300))
    assert opened == {**CLAIMS, "iat": T0, "exp": T0 + 300}


def test_fractional_ttl_rounds_exp_up() -> None:
    s = sealer(key("k1", 1), clock=FakeClock(T0 + 0.75))
    assert s.open(s.seal({}, 0.5))["exp"] == T0 + 1


def test_token_has_version_kid_and_unpadded_base64url_body() -> None:
    token = sealer(key("k1", 1)).seal(CLAIMS, 60)
    version, kid, body = token.split(".")
    assert (version, kid) == ("v1", "k1")
    assert "=" not in body
    payload = json.dumps({**CLAIMS, "iat": T0, "exp": T0 + 60}, separators=(",", ":"))
    assert len(unb64(body)) == 12 + len(payload) + 16


def test_claims_are_confidential() -> None:
    token = sealer(key("k1", 1)).seal({"secret_path": "private/diary.md"}, 60)
    raw = unb64(token.split(".")[2])
    assert b"diary" not in raw
    assert "diary" not in token


def test_nonce_is_fresh_for_every_seal() -> None:
    s = sealer(key("k1", 1))
    assert s.seal(CLAIMS, 60) != s.seal(CLAIMS, 60)


def test_seal_rejects_reserved_claims_bad_ttl_and_oversized_claims() -> None:
    s = sealer(key("k1", 1))
    for reserved in ("iat", "exp"):
        with pytest.raises(ValueError):
            s.seal({reserved: 1}, 60)
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            s.seal({}, ttl)
    with pytest.raises(ValueError):
        s.seal({"blob": "x" * MAX_STATE_LENGTH}, 60)


def test_state_error_is_a_notes_server_error_with_reason() -> None:
    err = StateError("expired")
    assert isinstance(err, NotesServerError)
    assert err.reason == "expired"


# --- tampering -----------------------------------------------------------------------------


def test_replacing_any_character_of_the_token_is_rejected() -> None:
    s = sealer(key("k1", 1))
    token = s.seal(CLAIMS, 300)
    candidates = ("A", "B", "_", "-", ".", "=", "v", "\x00", "é")
    for i, original in enumerate(token):
        for replacement in candidates:
            if replacement == original:
                continue
            tampered = token[:i] + replacement + token[i + 1 :]
            with pytest.raises(StateError):
                s.open(tampered)


def test_flipping_any_bit_of_nonce_ciphertext_or_tag_is_rejected() -> None:
    s = sealer(key("k1", 1))
    prefix, body = s.seal(CLAIMS, 300).rsplit(".", 1)
    raw = unb64(body)
    for i in range(len(raw)):
        for bit in (0x01, 0x80):
            flipped = raw[:i] + bytes([raw[i] ^ bit]) + raw[i + 1 :]
            assert reason_of(s, f"{prefix}.{b64(flipped)}") == "authentication failed"


def test_non_canonical_trailing_base64_bits_are_rejected() -> None:
    s = sealer(key("k1", 1))
    token = next(
        t for n in range(3) if len((t := s.seal({"pad": "x" * n}, 60)).split(".")[2]) % 4 != 0
    )
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(token[-1])
    sibling = token[:-1] + alphabet[last ^ 1]  # lowest bit of the last char is always unused
    assert unb64(sibling.split(".")[2]) == unb64(token.split(".")[2])
    assert reason_of(s, sibling) == "bad base64url"


def test_truncation_at_every_length_is_rejected() -> None:
    s = sealer(key("k1", 1))
    token = s.seal(CLAIMS, 300)
    for n in range(len(token)):
        with pytest.raises(StateError):
            s.open(token[:n])


def test_appending_characters_is_rejected() -> None:
    s = sealer(key("k1", 1))
    token = s.seal(CLAIMS, 300)
    for suffix in ("A", "AA", "AAA", "AAAA", "=", "==", "\n", " ", ".", ".k1", "\x00"):
        with pytest.raises(StateError):
            s.open(token + suffix)


def test_leading_garbage_and_wrong_version_are_rejected() -> None:
    s = sealer(key("k1", 1))
    token = s.seal(CLAIMS, 300)
    assert reason_of(s, " " + token) == "unsupported state version"
    assert reason_of(s, "v2" + token[2:]) == "unsupported state version"
    assert reason_of(s, "v1.k1") == "state is malformed"
    assert reason_of(s, "") == "state is malformed"


def test_same_kid_with_a_different_secret_cannot_open() -> None:
    token = sealer(key("k1", 1)).seal(CLAIMS, 300)
    assert reason_of(sealer(key("k1", 2)), token) == "authentication failed"


def test_unknown_kid_cannot_open() -> None:
    token = sealer(key("k1", 1)).seal(CLAIMS, 300)
    assert reason_of(sealer(key("k2", 1)), token) == "unknown key id"


def test_kid_is_bound_by_aad_even_when_secrets_match() -> None:
    s = sealer(key("k1", 7), key("k2", 7))
    token = s.seal(CLAIMS, 300)
    relabelled = "v1.k2." + token.split(".")[2]
    assert reason_of(s, relabelled) == "authentication failed"


def test_authenticated_payloads_must_be_json_objects_with_integer_times() -> None:
    k = key("k1", 1)
    s = sealer(k)
    cases = {
        b"\xff\xfe": "payload is not JSON",
        b"not json": "payload is not JSON",
        b"[1,2]": "payload is not a JSON object",
        json.dumps({"iat": T0}).encode(): "missing or non-integer exp",
        json.dumps({"iat": T0, "exp": str(T0 + 9)}).encode(): "missing or non-integer exp",
        json.dumps({"iat": T0, "exp": T0 + 9.5}).encode(): "missing or non-integer exp",
        json.dumps({"iat": T0, "exp": True}).encode(): "missing or non-integer exp",
        json.dumps({"exp": T0 + 9}).encode(): "missing or non-integer iat",
    }
    for plaintext, reason in cases.items():
        assert reason_of(s, forge(k, plaintext)) == reason
    assert s.open(forge(k, json.dumps({"iat": T0, "exp": T0 + 9}).encode()))["exp"] == T0 + 9


def test_aad_for_another_version_or_kid_is_rejected() -> None:
    k = key("k1", 1)
    payload = json.dumps({"iat": T0, "exp": T0 + 9}).encode()
    assert reason_of(sealer(k), forge(k, payload, aad_kid="k2")) == "authentication failed"


# --- rotation ------------------------------------------------------------------------------


def test_rotation_new_ring_opens_old_tokens_and_seals_with_new_key() -> None:
    old, new = key("old", 1), key("new", 2)
    old_token = sealer(old).seal(CLAIMS, 300)
    rotated = sealer(new, old)
    assert rotated.open(old_token)["tool"] == "delete_note"
    new_token = rotated.seal(CLAIMS, 300)
    assert new_token.startswith("v1.new.")
    assert rotated.open(new_token)["tool"] == "delete_note"


def test_rotation_ring_without_the_old_key_cannot_open_old_tokens() -> None:
    old_token = sealer(key("old", 1)).seal(CLAIMS, 300)
    assert reason_of(sealer(key("new", 2)), old_token) == "unknown key id"


# --- time ----------------------------------------------------------------------------------


def test_expiry_valid_until_one_second_before_exp_and_rejected_at_exp() -> None:
    clock = FakeClock()
    s = sealer(key("k1", 1), clock=clock)
    token = s.seal(CLAIMS, 300)
    clock.now = T0 + 299
    assert s.open(token)["exp"] == T0 + 300
    clock.now = T0 + 299.999
    assert s.open(token)["exp"] == T0 + 300
    clock.now = T0 + 300
    assert reason_of(s, token) == "expired"
    clock.now = T0 + 10_000
    assert reason_of(s, token) == "expired"


def test_iat_more_than_sixty_seconds_in_the_future_is_rejected() -> None:
    clock = FakeClock(T0 + 61)
    s = sealer(key("k1", 1), clock=clock)
    too_early = s.seal(CLAIMS, 300)
    clock.now = T0 + 60
    at_skew_limit = s.seal(CLAIMS, 300)
    clock.now = T0
    assert reason_of(s, too_early) == "issued in the future"
    assert s.open(at_skew_limit)["iat"] == T0 + 60


# --- hostile input shapes ------------------------------------------------------------------


def test_oversized_input_is_rejected_before_decoding() -> None:
    s = sealer(key("k1", 1))
    assert reason_of(s, "v1.k1." + "A" * MAX_STATE_LENGTH) == "state is too long"
    assert reason_of(s, "x" * 1_000_000) == "state is too long"


@pytest.mark.parametrize("value", [None, b"v1.k1.AAAA", 42, ["v1"], {"v": 1}])
def test_non_string_input_is_rejected(value: Any) -> None:
    assert reason_of(sealer(key("k1", 1)), value) == "state is not a string"


def test_bad_base64_and_too_short_bodies_are_rejected() -> None:
    s = sealer(key("k1", 1))
    assert reason_of(s, "v1.k1.AAAA+AAA") == "bad base64url"
    assert reason_of(s, "v1.k1.AAAA/AAA") == "bad base64url"
    assert reason_of(s, "v1.k1.AAAA==") == "bad base64url"
    assert reason_of(s, "v1.k1.AAAAA") == "bad base64url"
    assert reason_of(s, "v1.k1." + b64(bytes(27))) == "state is too short"
    assert reason_of(s, "v1.k1." + b64(bytes(28))) == "authentication failed"
