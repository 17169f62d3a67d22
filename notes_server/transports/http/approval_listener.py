"""The approval page for a stdio server: a loopback-only listener, started for an approval.

A stdio server has no HTTP endpoint to send the person to, and on embedded SQLite its sandbox
forbids creating sockets. So `serve` binds one TCP socket to 127.0.0.1 on an OS-chosen port
BEFORE it confines itself, and does not listen on it: nothing can connect until a
`notes_purge` asks for an approval, which starts listening and serves the approval page on a
thread (uvicorn on that socket, no access log, the app's logging untouched). The page signs the
person in with a one-time code printed on the server's stderr (`approval.login.CodeLogin`),
behind the same Origin/Host guard (DNS rebinding) and body limit as the HTTP transport.
"""

from __future__ import annotations

# The C module, not `socket`: importing `socket` (its enum conversions) cost ~3 ms of every
# stdio start; the listener wraps this one in a `socket.socket` when it starts.
import _socket
import threading
from typing import TYPE_CHECKING

from notes_server.config import HttpSettings

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from notes_server.tools.services import Services

FORM_LIMIT = 64 * 1024


class LoopbackApprovals:
    """A bound, not yet listening, loopback socket; `base()` starts serving on first use."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.lock = threading.Lock()
        self.started = False
        self.services: Services | None = None
        self.principal = ""

    @classmethod
    def bind(cls) -> LoopbackApprovals:
        """Call before the sandbox is installed: afterwards no socket can be created."""
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        return cls(sock)

    def attach(self, services: Services, principal: str) -> LoopbackApprovals:
        self.services, self.principal = services, principal
        return self

    def base(self) -> str:
        """The page's origin, listening from now on (the first call starts the listener)."""
        with self.lock:
            if not self.started:
                self._start()
                self.started = True
        return f"http://127.0.0.1:{self.port}"

    def _start(self) -> None:
        import socket

        import uvicorn

        # Adopts the descriptor (no new socket: the sandbox forbids creating one by now).
        listener = socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, self.sock.detach())
        listener.listen(16)
        config = uvicorn.Config(
            self._app(), log_config=None, access_log=False, lifespan="off", loop="asyncio"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [listener]}, name="approvals", daemon=True
        )
        thread.start()

    def _app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware

        from notes_server.features.purge.login import CodeLogin
        from notes_server.features.purge.page import routes
        from notes_server.transports.http.middleware.guard import OriginHostGuard
        from notes_server.transports.http.middleware.limits import BodyLimitMiddleware

        assert self.services is not None, "attach() before base()"
        http = HttpSettings(host="127.0.0.1", port=self.port)
        served = routes(self.services, CodeLogin(self.principal))
        # Its forms post only from its own origin: no other loopback page signs anyone in.
        forms = frozenset(r.path for r in served if getattr(r, "same_origin_forms", False) is True)
        return Starlette(
            routes=served,
            middleware=[
                Middleware(OriginHostGuard, http=http, same_origin_paths=forms),
                Middleware(BodyLimitMiddleware, limit=FORM_LIMIT),
            ],
        )
