"""`notes-server token create|list|revoke`: the secret is shown once and never again."""

from __future__ import annotations

import hashlib

from click.testing import CliRunner
from sqlalchemy import Engine, text

from notes_server.cli.main import main
from notes_server.config import Settings


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"NOTES_SERVER_DB": None})
    return result.exit_code, result.stdout, result.stderr


def test_create_prints_the_secret_once_and_stores_only_its_hash(
    settings: Settings, migrated_engine: Engine
) -> None:
    code, stdout, stderr = run(
        "token", "create", "alice", "--name", "laptop", "--db", settings.db_url
    )

    secret = stdout.strip()
    assert code == 0
    assert secret.startswith("nst_") and len(secret) == 47
    assert "created token 1 for alice (never expires)" in stderr
    with migrated_engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM api_tokens")).scalar_one()
    assert stored == hashlib.sha256(secret.encode()).hexdigest()


def test_list_and_revoke_never_show_the_secret(settings: Settings, migrated_engine: Engine) -> None:
    db = ("--db", settings.db_url)
    _, secret, _ = run("token", "create", "alice", "--expires", "30", "--name", "laptop", *db)

    _, listed, _ = run("token", "list", *db)
    revoked = run("token", "revoke", "1", *db)
    again = run("token", "revoke", "1", *db)
    _, after, _ = run("token", "list", "alice", *db)

    assert secret.strip() not in listed + after
    assert "1\talice\tactive\tlaptop\t" in listed
    assert revoked[0] == 0 and revoked[1] == "revoked token 1\n"
    assert again[0] == 1 and "no active token with id 1" in again[2]
    assert "1\talice\trevoked\tlaptop\t" in after


def test_list_without_tokens_says_so(settings: Settings, migrated_engine: Engine) -> None:
    assert run("token", "list", "--db", settings.db_url)[1] == "no tokens\n"
