"""`serve --auth oauth` refuses, at start and in one line, what would issue tokens for a
resource the clients cannot trust or name consistently."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from notes_server.cli.main import main
from notes_server.config import Settings


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "--auth oauth needs --public-url"),
        (("--public-url", "http://notes.example"), "--auth oauth needs an https --public-url"),
    ],
)
def test_an_unusable_public_url_stops_the_server_with_one_line(
    settings: Settings, migrated_engine: object, extra: tuple[str, ...], message: str
) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--transport", "http", "--auth", "oauth", "--db", settings.db_url, *extra],
        env={"NOTES_SERVER_STATE_KEYS": settings.state_keys or ""},
    )
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"notes-server: error: {message}")
