"""The "purge" extension: the `notes_purge` tool and, on HTTP, its approval page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from notes_server.extensions.base import Extension
from notes_server.tools.purge import PurgeNotes
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


def purge_extension(services: Services, page_base: str) -> Extension:
    """`page_base` is the server's own origin (`--public-url`, else the bound address): the
    approval page is served there, behind the same Origin/Host guard as `/mcp`."""

    def http_routes() -> Sequence[BaseRoute]:
        from notes_server.approval.page import routes

        return routes(services)

    return Extension(name="purge", tools=[PurgeNotes(services, page_base)], http_routes=http_routes)
