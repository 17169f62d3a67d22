"""The "purge" extension: the `notes_purge` tool and, on HTTP, its approval page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from notes_server.features.extension import Extension
from notes_server.features.purge.tool import PurgeNotes
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


def purge_extension(services: Services, page_base: Callable[[], str]) -> Extension:
    """`page_base()` is the approval page's origin: over HTTP the server's own (`--public-url`,
    else the bound address), where `http_routes` serve it behind the same Origin/Host guard as
    `/mcp`; over stdio the loopback listener's (`transports.http.approval_listener`)."""

    def http_routes() -> Sequence[BaseRoute]:
        from notes_server.features.purge.page import routes

        return routes(services)

    return Extension(name="purge", tools=[PurgeNotes(services, page_base)], http_routes=http_routes)
