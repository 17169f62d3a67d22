"""The "subscriptions" extension: `subscriptions/listen` and the capabilities it makes true.

`resources: {subscribe: true, listChanged: true}` is declared only by this extension, so a
server composed without it neither claims nor serves change notifications (-32601).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from notes_server.capabilities import declares_tasks
from notes_server.features.extension import Extension, LiveStream
from notes_server.features.subscriptions.hub import (
    METHOD,
    SubscriptionHub,
    check_uri,
    hub_of,
    read_filter,
)
from notes_server.tools.base import CallContext
from notes_server.tools.services import Services

if TYPE_CHECKING:
    from notes_server.features.tasks.watch import TaskWatch


class ListenMethod:
    """`subscriptions/listen`: the filter checked, then a listen of the hub. `static_schemes`:
    the URI schemes of other extensions' resources that a subscription may name though they
    never change (`Extension.static_resource_schemes`)."""

    def __init__(
        self,
        hub: SubscriptionHub,
        static_schemes: Collection[str] = (),
        tasks: TaskWatch | None = None,
    ) -> None:
        self.hub = hub
        self.static_schemes = frozenset(static_schemes)
        self.tasks = tasks

    def check_uri(self, uri: object) -> str:
        """A subscribed URI, checked as a listen checks it (2025-11-25 `resources/subscribe`)."""
        return check_uri(uri, self.static_schemes)

    def open(self, ctx: CallContext, params: dict[str, Any]) -> LiveStream:
        wanted = read_filter(params, self.static_schemes)
        asked = params["notifications"].get("taskIds")  # read_filter: an object
        if self.tasks is not None and asked is not None:
            from notes_server.features.tasks.runner import missing_extension
            from notes_server.features.tasks.watch import read_task_ids

            task_ids = read_task_ids(asked)
            if task_ids and not declares_tasks(ctx.capabilities):
                raise missing_extension()
            wanted = wanted._replace(task_ids=self.tasks.accept(ctx.principal, task_ids))
        roots = ctx.roots
        listen = self.hub.open(ctx.principal, ctx.request_id, wanted, roots=lambda: roots)
        if self.tasks is not None and wanted.task_ids:
            self.tasks.watch(listen, wanted.task_ids)
        return listen


def subscriptions_extension(
    services: Services, static_schemes: Collection[str] = (), tasks: TaskWatch | None = None
) -> Extension:
    """`static_schemes`: what the other extensions composed with it declare as
    `static_resource_schemes` (the composition root collects them); `tasks`: the Tasks
    extension's watch, when it is composed (`notifications.taskIds`)."""
    hub = hub_of(services)
    return Extension(
        name="subscriptions",
        capabilities={"resources": {"subscribe": True, "listChanged": True}},
        streams={METHOD: ListenMethod(hub, static_schemes, tasks)},
    )
