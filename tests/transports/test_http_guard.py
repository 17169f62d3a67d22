"""Origin and Host validation (DNS rebinding, cross-site browsers), decided before anything else."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from notes_server.config import HttpSettings
from notes_server.transports.http.middleware.guard import OriginHostGuard


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not reached")


def problem(http: HttpSettings, *pairs: tuple[str, str]) -> str | None:
    raw = [(k.lower().encode(), v.encode()) for k, v in pairs]
    return OriginHostGuard(_app, http).problem(Headers(raw=raw))


LOOPBACK = HttpSettings()
PUBLIC = HttpSettings(host="0.0.0.0", allowed_origins=("https://App.Example",))


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]:8765", "127.0.0.2"]
)
def test_loopback_hosts_are_allowed_on_a_loopback_bind(host: str) -> None:
    assert problem(LOOPBACK, ("Host", host)) is None


@pytest.mark.parametrize(
    "host", ["evil.example.com", "127.0.0.1.evil.example", "evil.example.com:8765", "[::2]", ""]
)
def test_other_hosts_are_refused_on_a_loopback_bind(host: str) -> None:
    assert problem(LOOPBACK, ("Host", host)) == "Forbidden: Host not allowed"


def test_a_missing_host_is_refused_on_a_loopback_bind() -> None:
    assert problem(LOOPBACK) == "Forbidden: Host not allowed"


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080"]
)
def test_loopback_origins_are_allowed_on_a_loopback_bind(origin: str) -> None:
    assert problem(LOOPBACK, ("Host", "127.0.0.1"), ("Origin", origin)) is None


@pytest.mark.parametrize(
    "origin", ["null", "http://evil.example.com", "file://", "http://localhost.evil.example"]
)
def test_other_origins_are_refused(origin: str) -> None:
    assert problem(LOOPBACK, ("Host", "127.0.0.1"), ("Origin", origin)) == (
        "Forbidden: Origin not allowed"
    )


def test_a_public_bind_checks_origins_against_the_allow_list_only() -> None:
    assert problem(PUBLIC, ("Host", "notes.example")) is None
    assert problem(PUBLIC, ("Host", "notes.example"), ("Origin", "https://app.example/")) is None
    refused = problem(PUBLIC, ("Host", "notes.example"), ("Origin", "http://localhost:3000"))
    assert refused == "Forbidden: Origin not allowed"


def test_two_origin_headers_are_refused() -> None:
    pairs = [("Host", "127.0.0.1"), ("Origin", "http://localhost"), ("Origin", "http://localhost")]
    assert problem(LOOPBACK, *pairs) == "Forbidden: Origin not allowed"
