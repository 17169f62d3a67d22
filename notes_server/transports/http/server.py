"""Starting the HTTP transport: refuse unsafe configurations, compose the app, run uvicorn.

Every worker process builds its own app through `app.http_worker_app` (an import-string
factory, which is what uvicorn needs to spawn workers); the parent hands its resolved settings
over through the environment (`config.export_worker_config`). Workers share the database and
the state keys, so a confirmation asked by one worker can be answered by another.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import socket
from pathlib import Path
from typing import Any

from notes_server.config import HttpSettings, Settings, export_worker_config
from notes_server.security.principals import SEPARATOR

# The composition root builds each worker's app (uvicorn needs an import string to spawn them).
WORKER_APP = "notes_server.app:http_worker_app"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# How long a worker may leave the supervisor's health ping unanswered before it is replaced.
# uvicorn's 5 s is shorter than the embedding model's first load, which holds the GIL for it
# (static_model's Rust loader: 2.5 s on an idle 2-core machine, 9 s measured under load), in
# the worker's indexer or its first semantic search.
WORKER_HEALTHCHECK_S = 60


class StartupError(Exception):
    """A configuration the HTTP server refuses to run with; the message says what to change."""


def oauth_problem(http: HttpSettings) -> str | None:
    """`--auth oauth` issues tokens for one resource named by one issuer URL: every worker and
    instance must agree on it, so it cannot be guessed from a request's Host."""
    url = http.public_url
    if not url:
        return "--auth oauth needs --public-url (the issuer and resource URL clients see)"
    if not url.startswith("https://") and not _loopback_url(url):
        return "--auth oauth needs an https --public-url (http only on a loopback address)"
    try:
        import argon2  # noqa: F401
        import authlib  # noqa: F401
    except ImportError:
        return "--auth oauth needs Authlib and argon2-cffi: pip install 'notes-server[oauth]'"
    return None


def _loopback_url(url: str) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    return host in ("127.0.0.1", "::1", "localhost")


def startup_problem(settings: Settings, http: HttpSettings) -> str | None:
    """Why this configuration must not serve HTTP, or None."""
    if http.auth == "none" and not http.loopback:
        return "--auth none is only allowed on a loopback host (127.0.0.1, ::1, localhost)"
    if not settings.state_keys and settings.state_key_file is None:
        return (
            "NOTES_SERVER_STATE_KEYS must be set when the database is not SQLite: every worker "
            "and every instance must seal and open confirmations with the same keys"
        )
    jwt_options = (http.jwt_issuer, http.jwt_audience, http.jwt_jwks)
    if any(jwt_options) and not all(jwt_options):
        return "--jwt-issuer, --jwt-audience and --jwt-jwks must be given together"
    if http.auth == "oauth":
        problem = oauth_problem(http)
        if problem is not None:
            return problem
    if any(jwt_options) and http.auth == "none":
        return "JWT options need --auth token"
    if http.jwt_client_ids and not all(jwt_options):
        return "--jwt-client-id needs --jwt-issuer, --jwt-audience and --jwt-jwks"
    if http.jwt_issuer and SEPARATOR in http.jwt_issuer:
        # It names JWT users (`<issuer>|<sub>`); the separator must split them unambiguously.
        return f"--jwt-issuer must not contain {SEPARATOR!r}"
    if http.workers < 1:
        return "--workers must be at least 1"
    url = http.public_url
    if url and (not url.startswith(("https://", "http://")) or any(c in url for c in '" \\')):
        return "--public-url must be an http(s) URL"
    return None


def prepare(settings: Settings, http: HttpSettings) -> None:
    """Checks that must fail in the parent, before any worker starts; nothing is created."""
    problem = startup_problem(settings, http)
    if problem is not None:
        raise StartupError(problem)
    if http.jwt_jwks:
        try:
            from notes_server.security.jwt_auth import JwksError, load_jwks
        except ImportError:
            raise StartupError("JWT support needs PyJWT: pip install 'notes-server[jwt]'") from None
        try:
            load_jwks(Path(http.jwt_jwks))
        except JwksError as exc:
            raise StartupError(str(exc)) from None


def create_key_file(settings: Settings) -> None:
    """The state key file beside an embedded database (without NOTES_SERVER_STATE_KEYS),
    created once here, so that workers only ever read it."""
    if not settings.state_keys:
        from notes_server.security.keyring import KeyRing

        assert settings.state_key_file is not None
        KeyRing.load_or_create_file(settings.state_key_file)


def log_config(level: str) -> dict[str, Any]:
    """One stderr handler on the root logger, in every worker; no access log by default."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": LOG_FORMAT}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "plain",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {"uvicorn.access": {"level": "WARNING"}},
    }


def listen(http: HttpSettings) -> tuple[socket.socket, HttpSettings]:
    """Bind and listen before anything is announced: a taken port is one line here, not a
    banner followed by uvicorn's failure. Returns the socket (inheritable, for the workers)
    and the settings with the port actually bound, so that `--port 0` serves everything a
    fixed port does (the purge approval page's URL names the real port)."""
    host = http.host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, http.port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"port {http.port} is in use (--port)") from None
        if isinstance(exc, socket.gaierror):
            raise StartupError(f"cannot listen on {http.host}: unknown host (--host)") from None
        why = exc.strerror or type(exc).__name__
        raise StartupError(f"cannot listen on {http.host}:{http.port}: {why}") from None
    # Workers receive the listening socket re-created from its descriptor, and asyncio then does
    # not recognise it as TCP, so it skips TCP_NODELAY on accepted connections: every reply
    # stalled ~40 ms on Nagle + delayed ACK. Set it on the listener; Linux passes it to accepts.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.set_inheritable(True)
    return sock, dataclasses.replace(http, port=int(sock.getsockname()[1]))


def run_http(settings: Settings, http: HttpSettings, sock: socket.socket) -> None:
    """Serve on `sock` (from `listen`, whose settings `http` are) until interrupted; `prepare`
    must have passed. uvicorn logs `Uvicorn running on http://HOST:PORT` once it serves."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from notes_server.transports.http.protocol import protocol_name

    export_worker_config(settings, http)
    config = uvicorn.Config(
        WORKER_APP,
        factory=True,
        http=protocol_name(),
        host=http.host,
        port=http.port,
        workers=http.workers,
        log_config=log_config(settings.log_level),
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=int(http.request_timeout) + 1,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )
    # uvicorn announces a socket it was handed only when it binds one itself; the line that
    # operators' scripts (and the tests) wait for is kept, in uvicorn's own words.
    host = f"[{http.host}]" if ":" in http.host else http.host
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", host, http.port
    )
    if http.workers == 1:
        uvicorn.Server(config).run(sockets=[sock])
        return
    Multiprocess(config, sockets=[sock]).run()
