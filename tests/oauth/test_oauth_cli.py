"""`notes-server user ...` and `notes-server client ...` through click's CliRunner, on the
fixtures' migrated database; the flow then shows what the commands changed."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner, Result
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.cli.main import main
from notes_server.config import Settings
from notes_server.security.passwords import verify_password
from notes_server.store import oauth
from notes_server.store.engine import read_tx
from tests.oauth.oauth_support import WS_A, Flow
from tests.oauth.test_oauth_flow import call


def cli(settings: Settings, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, [*args, "--db", settings.db_url], input=stdin)


def test_user_add_stores_only_an_argon2id_hash(settings: Settings, migrated_engine: Engine) -> None:
    added = cli(settings, "user", "add", "carol", "--password-stdin", stdin="carols-password\n")
    assert added.exit_code == 0, added.output
    with read_tx(migrated_engine) as conn:
        stored = oauth.password_hash(conn, "carol")
    assert stored is not None and stored.startswith("$argon2id$")
    assert "carols-password" not in stored
    assert verify_password(stored, "carols-password")


def test_user_add_twice_and_passwd_of_nobody_fail_with_one_line(
    settings: Settings, migrated_engine: Engine
) -> None:
    cli(settings, "user", "add", "carol", "--password-stdin", stdin="carols-password\n")
    again = cli(settings, "user", "add", "carol", "--password-stdin", stdin="carols-password\n")
    assert again.exit_code == 2 and "already has an account" in again.output
    nobody = cli(settings, "user", "passwd", "dave", "--password-stdin", stdin="daves-password\n")
    assert nobody.exit_code == 2 and "has no account" in nobody.output


def test_a_short_password_is_refused(settings: Settings, migrated_engine: Engine) -> None:
    short = cli(settings, "user", "add", "carol", "--password-stdin", stdin="short\n")
    assert short.exit_code == 2 and "at least 12 characters" in short.output


def test_passwd_lifts_a_lockout_and_remove_ends_sign_in(settings: Settings, flow: Flow) -> None:
    for i in range(5):
        flow.sign_in("alice", f"wrong-password-{i}")
    assert flow.sign_in("alice", "alice-password-1").status_code == 429
    changed = cli(
        settings, "user", "passwd", "alice", "--password-stdin", stdin="new-password-12\n"
    )
    assert changed.exit_code == 0, changed.output
    assert flow.sign_in("alice", "new-password-12").status_code == 303
    assert cli(settings, "user", "remove", "alice").exit_code == 0
    assert flow.sign_in("alice", "new-password-12").status_code == 401


def test_an_operator_client_completes_a_flow_and_revoking_it_ends_its_tokens(
    settings: Settings, app_client: TestClient, accounts: dict[str, str]
) -> None:
    added = cli(settings, "client", "add", "Desk app", "--redirect-uri", "http://127.0.0.1/cb")
    assert added.exit_code == 0, added.output
    client_id = added.stdout.split()[-1]
    listed = cli(settings, "client", "list")
    assert client_id in listed.output and "operator\tactive" in listed.output
    flow = _flow_for(app_client, client_id, "http://127.0.0.1/cb")
    tokens = flow.tokens()
    grants = cli(settings, "client", "grants", client_id)
    assert f"{client_id}\talice\tactive" in grants.output and WS_A in grants.output
    revoked = cli(settings, "client", "revoke", client_id)
    assert revoked.exit_code == 0
    assert call(app_client, tokens["access_token"], WS_A).status_code == 401
    assert flow.start().status_code == 400  # the client is gone: a page, no redirect


def test_client_grants_revoke_ends_one_consent(
    settings: Settings, flow: Flow, app_client: TestClient, migrated_engine: Engine
) -> None:
    tokens = flow.tokens()
    with read_tx(migrated_engine) as conn:
        (grant,) = oauth.list_grants(conn, flow.client_id)
    done = cli(settings, "client", "grants", "--revoke", grant.id)
    assert done.exit_code == 0, done.output
    assert call(app_client, tokens["access_token"], WS_A).status_code == 401
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"


def test_client_add_refuses_an_unsafe_redirect_uri(
    settings: Settings, migrated_engine: Engine
) -> None:
    bad = cli(settings, "client", "add", "x", "--redirect-uri", "http://evil.example/cb")
    assert bad.exit_code == 2 and "loopback" in bad.output


def _flow_for(client: TestClient, client_id: str, redirect: str) -> Any:
    from tests.oauth.oauth_support import pkce

    flow = Flow.__new__(Flow)
    flow.client, flow.redirect_uri, flow.client_id = client, redirect, client_id
    flow.verifier, flow.challenge = pkce()
    started = flow.start()
    assert started.status_code == 303, started.text
    return flow
