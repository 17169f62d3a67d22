"""Principal names: local ones (tokens, `--principal`) and external ones (JWT subjects).

A JWT `sub` is unique only within its issuer, and an identity provider's `alice` is not this
server's `alice`. So a JWT user is the principal `<issuer>|<sub>`, and a local principal may never
contain `|`: the two name spaces cannot collide, whatever the issuer puts in `sub`. An operator
grants a JWT user a workspace with exactly that string.
"""

from __future__ import annotations

SEPARATOR = "|"
MAX_LOCAL = 200


def local_problem(name: str) -> str | None:
    """Why `name` cannot be a local principal (a token's or `--principal`), or None."""
    if not name.strip() or len(name) > MAX_LOCAL:
        return f"must be 1-{MAX_LOCAL} characters"
    if SEPARATOR in name:
        return f"must not contain {SEPARATOR!r} (reserved for JWT users: ISSUER{SEPARATOR}SUBJECT)"
    if not name.isprintable():
        return "must not contain control characters"
    return None


def grantable_problem(name: str) -> str | None:
    """Why `name` can hold no grant: neither a local principal nor `ISSUER|SUBJECT`, or None."""
    if SEPARATOR not in name:
        return local_problem(name)
    issuer, _, subject = name.partition(SEPARATOR)
    if not issuer or not subject:
        return f"a JWT user is ISSUER{SEPARATOR}SUBJECT, both non-empty"
    if not name.isprintable():
        return "must not contain control characters"
    return None


def external(issuer: str, subject: str) -> str:
    """The principal of a JWT user; `issuer` never contains the separator (checked at start)."""
    return f"{issuer}{SEPARATOR}{subject}"


class ConsentedPrincipal(str):
    """A principal acting through an OAuth access token: it is the principal's name (equal to
    it, hashed like it, stored as it), and it carries the workspaces its user ticked on the
    consent page. Authorization (`tools.scope`) allows only those, and only while the
    principal's own grants still do: a consent never widens, it only narrows."""

    workspaces: frozenset[str]

    def __new__(cls, name: str, workspaces: frozenset[str]) -> ConsentedPrincipal:
        made = super().__new__(cls, name)
        made.workspaces = workspaces
        return made


def consented_workspaces(principal: str) -> frozenset[str] | None:
    """The workspaces an OAuth consent limits `principal` to, or None (no consent limit)."""
    return principal.workspaces if isinstance(principal, ConsentedPrincipal) else None
