"""Resource requests routed by URI scheme, and one paginated `resources/list` over providers.

With one provider its cursors pass through untouched. With several, providers are listed in
order, a page runs on into the next provider when one is exhausted (so no page is empty while
resources remain), and a cursor is the provider's own cursor wrapped with its scheme: opaque to
clients, and checked again by the provider that issued it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from notes_server.errors import InvalidParams, resource_not_found
from notes_server.features.extension import ResourceProvider
from notes_server.security import b64url
from notes_server.tools.base import CallContext

SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
MAX_SCHEME = 64
MAX_CURSOR = 4096


def scheme_of(uri: str) -> str | None:
    """The URI's scheme, lower-cased (RFC 3986: schemes are case-insensitive), or None."""
    head, colon, _ = uri.partition(":")
    if not colon or len(head) > MAX_SCHEME:
        return None
    scheme = head.lower()
    return scheme if SCHEME.fullmatch(scheme) else None


class ResourceRouter:
    """A ResourceProvider over providers keyed by scheme, in contribution order."""

    def __init__(self, providers: Sequence[tuple[str, ResourceProvider]]) -> None:
        self._order = [scheme for scheme, _ in providers]
        self._providers = dict(providers)

    def schemes(self) -> list[str]:
        return list(self._order)

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        scheme = scheme_of(uri)
        provider = self._providers.get(scheme) if scheme is not None else None
        if provider is None:
            raise resource_not_found(uri)
        return provider.read_resource(ctx, uri)

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        if not self._order:
            if cursor is not None:
                raise InvalidParams("Invalid cursor")
            return [], None
        if len(self._order) == 1:
            return self._providers[self._order[0]].list_resources(ctx, cursor)
        index, inner = (0, None) if cursor is None else self._open(cursor)
        resources: list[dict[str, Any]] = []
        while index < len(self._order):
            scheme = self._order[index]
            page, after = self._providers[scheme].list_resources(ctx, inner)
            resources.extend(page)
            if after is not None:
                return resources, _wrap(scheme, after)
            index, inner = index + 1, None
        return resources, None

    def _open(self, cursor: str) -> tuple[int, str]:
        """(provider index, the provider's own cursor); -32602 for anything not issued here."""
        try:
            if len(cursor) > MAX_CURSOR:
                raise ValueError("too long")
            scheme, sep, inner = b64url.decode(cursor).decode("utf-8").partition("\n")
        except (ValueError, UnicodeDecodeError):
            raise InvalidParams("Invalid cursor") from None
        if not sep or scheme not in self._providers:
            raise InvalidParams("Invalid cursor")
        return self._order.index(scheme), inner


def _wrap(scheme: str, cursor: str) -> str:
    return b64url.encode(f"{scheme}\n{cursor}".encode())
