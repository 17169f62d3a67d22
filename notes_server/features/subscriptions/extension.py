"""The "subscriptions" extension: `subscriptions/listen` and the capabilities it makes true.

`resources: {subscribe: true, listChanged: true}` is declared only by this extension, so a
server composed without it neither claims nor serves change notifications (-32601).
"""

from __future__ import annotations

from typing import Any

from notes_server.features.extension import Extension, LiveStream
from notes_server.features.subscriptions.hub import METHOD, SubscriptionHub, hub_of, read_filter
from notes_server.tools.base import CallContext
from notes_server.tools.services import Services


class ListenMethod:
    """`subscriptions/listen`: the filter checked, then a listen of the hub."""

    def __init__(self, hub: SubscriptionHub) -> None:
        self.hub = hub

    def open(self, ctx: CallContext, params: dict[str, Any]) -> LiveStream:
        wanted = read_filter(params)
        roots = ctx.roots
        return self.hub.open(ctx.principal, ctx.request_id, wanted, roots=lambda: roots)


def subscriptions_extension(services: Services) -> Extension:
    hub = hub_of(services)
    return Extension(
        name="subscriptions",
        capabilities={"resources": {"subscribe": True, "listChanged": True}},
        streams={METHOD: ListenMethod(hub)},
    )
