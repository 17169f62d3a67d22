"""The tool registry and the shipped notes tools, in their fixed order.

What a server serves (the notes extension built from these, the features, `--tools-module`)
is composed in `notes_server.app`; this module knows no feature.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from notes_server.tools.archive import ArchiveNote, RestoreNote
from notes_server.tools.base import Tool
from notes_server.tools.create import CreateNote
from notes_server.tools.delete import DeleteNote
from notes_server.tools.edit import EditNote
from notes_server.tools.history import NoteHistory, RevertNote
from notes_server.tools.links import NoteLinks
from notes_server.tools.move import MoveNote
from notes_server.tools.read import ReadNote
from notes_server.tools.search import SearchNotes
from notes_server.tools.tags import ListTags
from notes_server.tools.update import UpdateNote

ToolMetaHook = Callable[[Tool, Mapping[str, Any]], "dict[str, Any] | None"]
"""(tool, the request's client capabilities) -> `_meta` entries for that tool, or None."""

ToolMetaVariant = Callable[[Mapping[str, Any]], Hashable]
"""The request's client capabilities -> the small key `tool_meta`'s answers depend on."""

SHIPPED: tuple[type[Tool], ...] = (
    CreateNote,
    SearchNotes,
    ReadNote,
    UpdateNote,
    EditNote,
    MoveNote,
    DeleteNote,
    ArchiveNote,
    RestoreNote,
    NoteLinks,
    ListTags,
    NoteHistory,
    RevertNote,
)


class ToolRegistry:
    """Tools by name, in order. `meta_hooks` add `_meta` to descriptors per request; without
    them the listing is the same for every request (and the server caches its bytes).
    `variants`, one per hook when every hook has one, key the listing per request cheaply."""

    def __init__(
        self,
        tools: Iterable[Tool],
        meta_hooks: Sequence[ToolMetaHook] = (),
        variants: Sequence[ToolMetaVariant] | None = None,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
        self._listing = [tool.describe() for tool in self._tools.values()]
        self._hooks = tuple(meta_hooks)
        self._variant_key = _variant_key(variants)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def listing(self) -> list[dict[str, Any]]:
        """The descriptors without any per-request `_meta`."""
        return self._listing

    @property
    def varies(self) -> bool:
        """Whether the listing may depend on the request's client capabilities."""
        return bool(self._hooks)

    def variant_key(self, capabilities: Mapping[str, Any]) -> Hashable | None:
        """A small key for the listing these client capabilities get (equal keys, equal
        listings); None when some hook declares no variant (then only `metas_for` tells)."""
        return None if self._variant_key is None else self._variant_key(capabilities)

    def metas_for(self, capabilities: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
        """Per tool, in order, the `_meta` entries the hooks add for these client capabilities
        (merged in hook order; empty when no hook adds any)."""
        metas = []
        for tool in self._tools.values():
            meta: dict[str, Any] = {}
            for hook in self._hooks:
                meta.update(hook(tool, capabilities) or {})
            metas.append(meta)
        return tuple(metas)

    def listing_with(self, metas: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The descriptors with `metas` (from `metas_for`) merged into each one's `_meta`."""
        listing = []
        for entry, extra in zip(self._listing, metas, strict=True):
            meta = {**entry.get("_meta", {}), **extra}
            listing.append({**entry, "_meta": meta} if meta else entry)
        return listing

    def names(self) -> list[str]:
        return list(self._tools)


def _variant_key(
    variants: Sequence[ToolMetaVariant] | None,
) -> Callable[[Mapping[str, Any]], Hashable] | None:
    """One variant is its own key (the common case: one call per `tools/list`)."""
    if variants is None:
        return None
    if len(variants) == 1:
        return variants[0]
    return lambda capabilities: tuple(variant(capabilities) for variant in variants)
