"""JWT access tokens from an external authorization server, as a second principal source.

The server is an OAuth resource server: it never issues JWTs, it only checks them against the
issuer's public keys, read once from a JWKS file the operator provides (no network fetches at
request time, so an unreachable issuer cannot stall or redirect verification). A token is
accepted only with a valid signature by an asymmetric key from that file, the configured `iss`
and `aud`, an unexpired `exp`, and a non-empty `sub`, which becomes the principal. The reason a
token fails goes to the log, never to the client.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jwt

# Asymmetric only: a shared-secret (HS*) key in a "public" key set would let anyone who can read
# the JWKS file mint tokens, and "none" is never acceptable.
ASYMMETRIC_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
ALLOWED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
MAX_SUBJECT = 200
LEEWAY_SECONDS = 30

log = logging.getLogger("notes_server.auth")


class JwksError(ValueError):
    """The JWKS file is unusable; raised at start-up, never per request."""


def load_jwks(path: Path) -> dict[str | None, jwt.PyJWK]:
    """Asymmetric signing keys from a JWKS file, by `kid` (None for a key without one)."""
    try:
        key_set = jwt.PyJWKSet.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, jwt.PyJWTError) as exc:
        raise JwksError(f"cannot load JWKS file {path}: {exc}") from None
    keys: dict[str | None, jwt.PyJWK] = {}
    for key in key_set.keys:
        usable = (
            key.key_type in ASYMMETRIC_KEY_TYPES
            and key.algorithm_name in ALLOWED_ALGORITHMS
            and key.public_key_use in (None, "sig")
        )
        if usable:
            keys[key.key_id] = key
    if not keys:
        raise JwksError(f"JWKS file {path} has no asymmetric signing keys")
    return keys


class JwtVerifier:
    def __init__(self, issuer: str, audience: str, jwks_path: Path) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = load_jwks(jwks_path)

    def principal_for(self, token: str) -> str | None:
        """The `sub` of a valid token, else None (the reason is logged)."""
        try:
            key = self._key_for(jwt.get_unverified_header(token))
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[key.algorithm_name],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            log.info("JWT rejected: %s", type(exc).__name__)
            return None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT:
            log.info("JWT rejected: unusable sub claim")
            return None
        return subject

    def _key_for(self, header: dict[str, Any]) -> jwt.PyJWK:
        kid = header.get("kid")
        key = self.keys.get(kid) if isinstance(kid, str) else None
        if key is None and kid is None and len(self.keys) == 1:
            key = next(iter(self.keys.values()))
        if key is None:
            raise jwt.InvalidKeyError("no JWKS key for this kid")
        if header.get("alg") != key.algorithm_name:
            raise jwt.InvalidAlgorithmError("alg does not match the key")
        return key
