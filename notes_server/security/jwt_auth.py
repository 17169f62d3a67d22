"""JWT access tokens from an external authorization server, as a second principal source.

The server is an OAuth resource server: it never issues JWTs, it only checks them against the
issuer's public keys, read once from a JWKS file the operator provides (no network fetches at
request time, so an unreachable issuer cannot stall or redirect verification). A token is
accepted only with a valid signature by an asymmetric key from that file, a `typ` (if any) of
JWT or at+jwt, the configured `iss` and `aud`, an unexpired `exp`, a usable `sub` and, when
client ids are configured, an `azp`/`client_id` among them. The principal is `<issuer>|<sub>`
(see `principals`), never the bare `sub`. The reason a token fails goes to the log, never to
the client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from notes_server.security.principals import external

# Asymmetric only: a shared-secret (HS*) key in a "public" key set would let anyone who can read
# the JWKS file mint tokens, and "none" is never acceptable.
ASYMMETRIC_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
ALLOWED_ALGORITHMS = frozenset({*RSA_ALGORITHMS, "ES256", "ES384", "ES512", "EdDSA"})
# RFC 7519 and RFC 9068 `typ` values, compared without case and without "application/".
ACCEPTED_TYPES = frozenset({"jwt", "at+jwt"})
CLIENT_CLAIMS = ("azp", "client_id")
MAX_SUBJECT = 200
LEEWAY_SECONDS = 30

log = logging.getLogger("notes_server.auth")


class JwksError(ValueError):
    """The JWKS file is unusable; raised at start-up, never per request."""


class Rejected(jwt.InvalidTokenError):
    """A token this server refuses for a reason of its own (typ, sub, client)."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One public key of the JWKS file bound to one algorithm it may verify."""

    kid: str | None
    algorithm: str
    key: jwt.PyJWK


def load_jwks(path: Path) -> list[VerificationKey]:
    """Every asymmetric signing key of a JWKS file, with or without `kid`; none overwrites
    another, so two kid-less keys (an issuer rotating keys) are both kept."""
    found = [key for entry in _entries(path) for key in _bindings(entry)]
    if not found:
        raise JwksError(f"JWKS file {path} has no asymmetric signing keys")
    return found


def _entries(path: Path) -> list[dict[str, Any]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JwksError(f"cannot load JWKS file {path}: {exc}") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise JwksError(f'cannot load JWKS file {path}: no "keys" list')
    entries = [entry for entry in keys if isinstance(entry, dict)]
    if any("d" in entry for entry in entries):
        # A private key here is a leaked signing key, and it cannot verify (it would fail at
        # the first request): refuse it at start.
        raise JwksError(f'JWKS file {path} holds private key material ("d"): give public keys')
    return entries


def _bindings(entry: dict[str, Any]) -> list[VerificationKey]:
    """The key bound to its declared `alg`; without one, to every algorithm its type allows
    (any RS/PS algorithm for RSA; an EC or OKP key's curve fixes its algorithm)."""
    if entry.get("kty") not in ASYMMETRIC_KEY_TYPES or entry.get("use") not in (None, "sig"):
        return []
    declared = entry.get("alg")
    algorithms: tuple[str | None, ...] = (declared,)
    if declared is None and entry.get("kty") == "RSA":
        algorithms = RSA_ALGORITHMS
    kid = entry.get("kid")
    bound = []
    for algorithm in algorithms:
        try:
            key = jwt.PyJWK(entry, algorithm)
        except (jwt.PyJWTError, ValueError, TypeError):
            continue
        if key.algorithm_name in ALLOWED_ALGORITHMS:
            bound.append(
                VerificationKey(kid if isinstance(kid, str) else None, key.algorithm_name, key)
            )
    return bound


def check_type(header: dict[str, Any]) -> None:
    """A `typ` header, when present, must say JWT or at+jwt (RFC 9068)."""
    if "typ" not in header:
        return
    typ = header["typ"]
    if not isinstance(typ, str) or typ.lower().removeprefix("application/") not in ACCEPTED_TYPES:
        raise Rejected("typ header is neither JWT nor at+jwt")


class JwtVerifier:
    def __init__(
        self, issuer: str, audience: str, jwks_path: Path, client_ids: Iterable[str] = ()
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.client_ids = frozenset(client_ids)
        self.keys = load_jwks(jwks_path)

    def principal_for(self, token: str) -> str | None:
        """`<issuer>|<sub>` of a valid token, else None (the reason is logged)."""
        try:
            claims = self._verified_claims(token)
            subject = claims.get("sub")
            if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT:
                raise Rejected("unusable sub claim")
            if not subject.isprintable():
                raise Rejected("sub claim has control characters")
            self._check_client(claims)
        except jwt.PyJWTError as exc:
            # Our own reasons are fixed strings; a library message may quote the token.
            log.info("JWT rejected: %s", exc if isinstance(exc, Rejected) else type(exc).__name__)
            return None
        return external(self.issuer, subject)

    def _verified_claims(self, token: str) -> dict[str, Any]:
        """Claims of a token whose signature one candidate key verifies: a token naming a `kid`
        is tried only with that kid's keys, one without with every key of its `alg`."""
        header = jwt.get_unverified_header(token)
        check_type(header)
        candidates = self._candidates(header)
        if not candidates:
            raise jwt.InvalidKeyError("no JWKS key for this kid and alg")
        for key in candidates[:-1]:
            try:
                return self._decode(token, key)
            except jwt.InvalidSignatureError:
                continue
        return self._decode(token, candidates[-1])

    def _candidates(self, header: dict[str, Any]) -> list[VerificationKey]:
        kid, alg = header.get("kid"), header.get("alg")
        if kid is not None and not isinstance(kid, str):
            return []
        return [k for k in self.keys if k.algorithm == alg and (kid is None or k.kid == kid)]

    def _decode(self, token: str, key: VerificationKey) -> dict[str, Any]:
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key.key,
            algorithms=[key.algorithm],
            audience=self.audience,
            issuer=self.issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )
        return claims

    def _check_client(self, claims: dict[str, Any]) -> None:
        """With client ids configured, the token must name its client (`azp`, or RFC 9068's
        `client_id`), and every such claim present must be one of them: a token that names no
        client cannot slip past the restriction."""
        if not self.client_ids:
            return
        named = [claims[name] for name in CLIENT_CLAIMS if name in claims]
        if not named:
            raise Rejected("no azp or client_id claim, and client ids are configured")
        if any(not isinstance(value, str) or value not in self.client_ids for value in named):
            raise Rejected("azp or client_id is not a configured client id")
