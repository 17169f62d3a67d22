"""Principal names on the command line: `|` separates a JWT user's issuer from its subject, so
no local principal (a token's, `--principal`) may contain it, and `workspace grant` accepts the
`ISSUER|SUBJECT` form so an operator can grant an identity provider's user."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from notes_server.cli.main import main

JWT_USER = "https://idp.example|alice"


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    base = {
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "NOTES_SERVER_DB": None,
        "NOTES_SERVER_PRINCIPAL": None,
        "NOTES_SERVER_STATE_KEYS": None,
    }
    return CliRunner().invoke(main, list(args), env={**base, **(env or {})})


def test_a_jwt_user_can_be_granted_listed_and_revoked(tmp_path: Path) -> None:
    granted = run(tmp_path, "workspace", "grant", JWT_USER, "file:///srv/alice")
    listed = run(tmp_path, "workspace", "list", JWT_USER)
    revoked = run(tmp_path, "workspace", "revoke", JWT_USER, "file:///srv/alice")

    assert granted.exit_code == 0, granted.output
    assert granted.stdout == f"granted: {JWT_USER} may use file:///srv/alice (write)\n"
    assert listed.stdout.splitlines() == [f"{JWT_USER}\twrite\tfile:///srv/alice"]
    assert revoked.exit_code == 0, revoked.output


@pytest.mark.parametrize(
    ("principal", "problem"),
    [
        ("|alice", "a JWT user is ISSUER|SUBJECT, both non-empty"),
        ("https://idp.example|", "a JWT user is ISSUER|SUBJECT, both non-empty"),
        ("https://idp.example|al\nice", "must not contain control characters"),
        ("bob\t", "must not contain control characters"),
    ],
)
def test_a_malformed_principal_cannot_be_granted(
    tmp_path: Path, principal: str, problem: str
) -> None:
    result = run(tmp_path, "workspace", "grant", principal, "file:///srv/alice")

    assert result.exit_code == 2
    assert problem in result.stderr
    assert "Traceback" not in result.output


def test_a_token_cannot_be_made_for_a_name_with_the_separator(tmp_path: Path) -> None:
    result = run(tmp_path, "token", "create", JWT_USER)

    assert result.exit_code == 2
    assert "must not contain '|' (reserved for JWT users: ISSUER|SUBJECT)" in result.stderr
    assert "nst_" not in result.output


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["serve", "--principal", JWT_USER], {}),
        (["serve"], {"NOTES_SERVER_PRINCIPAL": JWT_USER}),
        (["serve", "--transport", "http", "--auth", "none", "--principal", JWT_USER], {}),
    ],
    ids=["stdio-option", "stdio-env", "http-auth-none"],
)
def test_serve_refuses_to_act_as_a_jwt_user(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    result = run(tmp_path, *args, env=env)

    assert result.exit_code == 2
    assert "Invalid value for --principal / $NOTES_SERVER_PRINCIPAL: must not contain '|'" in (
        result.stderr
    )
