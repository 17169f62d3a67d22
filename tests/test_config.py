"""Settings resolution: flags over environment over defaults, and secrets kept out of sight."""

from __future__ import annotations

from pathlib import Path

import pytest

from notes_server.app import check_settings
from notes_server.config import Settings, SettingsError, build_settings, os_login
from notes_server.security.keyring import KeyRing

XDG = "/srv/xdg"


def test_the_db_flag_wins_over_the_environment() -> None:
    settings = build_settings(
        db="sqlite:////flag.db", env={"NOTES_SERVER_DB": "sqlite:////env.db", "XDG_DATA_HOME": XDG}
    )

    assert settings.db_url == "sqlite:////flag.db"
    assert settings.db_is_default is False


def test_the_environment_db_wins_over_the_default() -> None:
    settings = build_settings(env={"NOTES_SERVER_DB": "sqlite:////env.db", "XDG_DATA_HOME": XDG})

    assert settings.db_url == "sqlite:////env.db"
    assert settings.db_is_default is False


def test_without_configuration_the_db_lives_in_the_xdg_data_directory() -> None:
    settings = build_settings(env={"XDG_DATA_HOME": XDG})

    assert settings.db_url == f"sqlite:///{XDG}/notes-server/notes.db"
    assert settings.db_is_default is True
    assert settings.sqlite_path == Path(XDG) / "notes-server" / "notes.db"


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_a_missing_or_relative_xdg_data_home_falls_back_to_local_share(xdg: str | None) -> None:
    env = {} if xdg is None else {"XDG_DATA_HOME": xdg}

    settings = build_settings(env=env)

    expected = Path.home() / ".local" / "share" / "notes-server" / "notes.db"
    assert settings.db_url == f"sqlite:///{expected}"


def test_an_empty_environment_db_counts_as_unset() -> None:
    settings = build_settings(env={"NOTES_SERVER_DB": "", "XDG_DATA_HOME": XDG})

    assert settings.db_is_default is True


def test_the_principal_flag_wins_over_the_environment() -> None:
    settings = build_settings(principal="flag", env={"NOTES_SERVER_PRINCIPAL": "env"})

    assert settings.principal == "flag"


def test_the_environment_principal_wins_over_the_login_name() -> None:
    assert build_settings(env={"NOTES_SERVER_PRINCIPAL": "env"}).principal == "env"


def test_without_configuration_the_principal_is_the_login_name() -> None:
    assert build_settings(env={}).principal == os_login()


def test_state_keys_and_log_level_come_from_the_environment() -> None:
    spec = KeyRing.generate_spec()

    settings = build_settings(
        env={"NOTES_SERVER_STATE_KEYS": spec, "NOTES_SERVER_LOG_LEVEL": "debug"}
    )

    assert settings.state_keys == spec
    assert settings.log_level == "DEBUG"


def test_settings_are_frozen() -> None:
    settings = build_settings(env={})

    with pytest.raises(AttributeError):
        settings.principal = "mallory"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://notes:s3cret@db.internal:5432/notes",
            "postgresql://***@db.internal:5432/notes",
        ),
        ("postgresql+psycopg://u:p%40ss@host/db", "postgresql+psycopg://***@host/db"),
        ("postgresql://u:pa/ss@host/db", "postgresql://***@host/db"),
        ("postgresql://u:p@ss@host/db", "postgresql://***@host/db"),
        ("sqlite:////var/lib/notes/notes.db", "sqlite:////var/lib/notes/notes.db"),
        ("sqlite:////srv/@team/notes.db", "sqlite:////srv/@team/notes.db"),
        ("sqlite:///rel@tive.db", "sqlite:///rel@tive.db"),
    ],
)
def test_db_display_hides_credentials(url: str, shown: str) -> None:
    settings = Settings(db_url=url)

    assert settings.db_display == shown
    for secret in ("s3cret", "p%40ss", "pa/ss", "p@ss"):
        assert secret not in settings.db_display


def test_repr_never_shows_state_keys() -> None:
    spec = KeyRing.generate_spec()
    settings = build_settings(env={"NOTES_SERVER_STATE_KEYS": spec})

    text = repr(settings) + str(settings)

    assert spec not in text
    for part in spec.replace(",", ":").split(":"):
        if len(part) >= 16:
            assert part not in text


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////abs/notes.db", Path("/abs/notes.db")),
        ("sqlite:////abs/notes.db?mode=rwc", Path("/abs/notes.db")),
        ("sqlite+pysqlite:////abs/notes.db", Path("/abs/notes.db")),
        ("sqlite:////abs/with%20space/notes.db", Path("/abs/with space/notes.db")),
        ("postgresql://u@h/db", None),
    ],
)
def test_sqlite_path_is_known_only_for_file_databases(url: str, path: Path | None) -> None:
    settings = Settings(db_url=url)

    assert settings.sqlite_path == path
    assert settings.state_key_file == (
        None if path is None else path.with_name(path.name + ".state-keys")
    )


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////abs/notes.db",
        "sqlite+pysqlite:////abs/notes.db",
        "sqlite:////abs/notes.db?timeout=5",
    ],
)
def test_every_spelling_of_one_sqlite_file_resolves_to_the_same_path(url: str) -> None:
    settings = build_settings(db=url, env={})

    assert settings.sqlite_path == Path("/abs/notes.db")
    assert settings.state_key_file == Path("/abs/notes.db.state-keys")


def test_a_relative_sqlite_path_is_made_absolute_once_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    settings = build_settings(db="sqlite:///sub/notes.db", env={})

    assert settings.sqlite_path == tmp_path / "sub" / "notes.db"
    assert settings.db_url == f"sqlite:///{tmp_path}/sub/notes.db"


def test_a_percent_in_the_home_directory_stays_part_of_the_embedded_path() -> None:
    settings = build_settings(env={"XDG_DATA_HOME": "/srv/a%41b"})

    assert settings.sqlite_path == Path("/srv/a%41b/notes-server/notes.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite+aiosqlite:////abs/notes.db", "unsupported SQLite driver"),
        ("sqlite:///file:notes.db?uri=true", "'uri' is not supported"),
        ("sqlite:relative.db", "sqlite:////absolute/path"),
        ("mysql://user:s3cret@host/db", "unsupported database backend 'mysql'"),
        ("not a url", "not a URL SQLAlchemy understands"),
    ],
)
def test_a_database_url_that_cannot_work_is_refused_at_start(url: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build_settings(db=url, env={})

    assert str(caught.value).startswith("--db: ")
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    "spec", ["kid-only", "k1:c2VjcmV0c2VjcmV0", "k1:!!!!", "bad kid!:" + "A" * 43]
)
def test_malformed_state_keys_are_refused_at_start_without_echoing_them(spec: str) -> None:
    settings = build_settings(env={"NOTES_SERVER_STATE_KEYS": spec})

    with pytest.raises(SettingsError) as caught:
        check_settings(settings)

    assert str(caught.value).startswith("NOTES_SERVER_STATE_KEYS: ")
    assert spec not in str(caught.value)
    assert spec.rpartition(":")[2] not in str(caught.value)


def test_an_unknown_log_level_is_refused_at_start() -> None:
    with pytest.raises(SettingsError, match="NOTES_SERVER_LOG_LEVEL"):
        build_settings(env={"NOTES_SERVER_LOG_LEVEL": "chatty"})


def test_the_roots_wait_comes_from_the_environment_and_defaults_to_unset() -> None:
    assert build_settings(env={"NOTES_SERVER_ROOTS_WAIT": "2.5"}).roots_wait_s == 2.5
    assert build_settings(env={"NOTES_SERVER_ROOTS_WAIT": ""}).roots_wait_s is None
    assert build_settings(env={}).roots_wait_s is None


@pytest.mark.parametrize("raw", ["0", "-1", "0.05", "3601", "soon", "nan", "inf"])
def test_a_roots_wait_outside_its_range_is_refused_at_start(raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build_settings(env={"NOTES_SERVER_ROOTS_WAIT": raw})

    assert str(caught.value) == "NOTES_SERVER_ROOTS_WAIT: expected seconds from 0.1 to 3600"
