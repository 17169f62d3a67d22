"""Composes extensions into what the server serves: one tool registry, one resource router,
the `server/discover` capabilities and the HTTP routes.

Composition is checked once, at start: two extensions may not share a name, a tool name, a URI
scheme, an `extensions` id, a method or a capability value, nor may two hook `tools/call`; such
a clash is a `SettingsError` (one line, exit 2), never a silent override. Order is the order
the extensions were given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from notes_server.config import SettingsError
from notes_server.features.extension import (
    Extension,
    ExtensionMethod,
    ResourceTemplate,
    StreamMethod,
    ToolCallHook,
)
from notes_server.features.prompts.base import PromptRegistry
from notes_server.features.resources import SCHEME, ResourceRouter
from notes_server.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

# `_meta`-style key with its mandatory prefix: labels separated by dots, a slash, a name.
EXTENSION_ID = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?/[A-Za-z0-9]([\w.-]*[A-Za-z0-9])?"
)


class ExtensionConflict(SettingsError):
    """Two extensions contribute the same thing, or one contributes something malformed."""


class ExtensionRegistry:
    def __init__(self, extensions: Sequence[Extension]) -> None:
        self.extensions = tuple(extensions)
        _unique("extension name", [(e.name, e.name) for e in self.extensions])
        _unique("tool", [(t.name, e.name) for e in self.extensions for t in e.tools])
        _unique("prompt", [(p.name, e.name) for e in self.extensions for p in e.prompts])
        _unique(
            "resource template",
            [(t.uri_template, e.name) for e in self.extensions for t in e.resource_templates],
        )
        providers = [
            (s, p, e.name) for e in self.extensions for s, p in e.resource_providers.items()
        ]
        _unique("URI scheme", [(s, owner) for s, _, owner in providers])
        for scheme, _, owner in providers:
            if not SCHEME.fullmatch(scheme):
                raise ExtensionConflict(
                    f"extension {owner!r}: {scheme!r} is not a lower-case URI scheme"
                )
        for extension in self.extensions:
            for scheme in sorted(
                extension.static_resource_schemes - extension.resource_providers.keys()
            ):
                raise ExtensionConflict(
                    f"extension {extension.name!r}: static resource scheme {scheme!r} "
                    "is not one of its resource providers"
                )
        hooked = [e for e in self.extensions if e.tool_meta is not None]
        hooks = [e.tool_meta for e in hooked if e.tool_meta is not None]
        variants = [e.tool_meta_variant for e in hooked if e.tool_meta_variant is not None]
        self.tools = ToolRegistry(
            [t for e in self.extensions for t in e.tools],
            hooks,
            variants if len(variants) == len(hooks) else None,
        )
        self.resources = ResourceRouter([(s, p) for s, p, _ in providers])
        self.prompts = PromptRegistry([p for e in self.extensions for p in e.prompts])
        self.templates: tuple[ResourceTemplate, ...] = tuple(
            t for e in self.extensions for t in e.resource_templates
        )
        self.capabilities = _capabilities(self.extensions, bool(providers))
        _unique("method", [(m, e.name) for e in self.extensions for m in e.methods])
        self.methods: dict[str, ExtensionMethod] = {
            m: handler for e in self.extensions for m, handler in e.methods.items()
        }
        hooks_of_calls = [e for e in self.extensions if e.tool_call_hook is not None]
        _unique("tools/call hook", [("tools/call hook", e.name) for e in hooks_of_calls])
        self.tool_call_hook: ToolCallHook | None = (
            hooks_of_calls[0].tool_call_hook if hooks_of_calls else None
        )
        _unique("long-lived method", [(m, e.name) for e in self.extensions for m in e.streams])
        self.streams: dict[str, StreamMethod] = {
            m: method for e in self.extensions for m, method in e.streams.items()
        }

    def http_routes(self) -> list[BaseRoute]:
        """Every extension's routes, in extension order (builds them: HTTP only)."""
        return [route for extension in self.extensions for route in extension.http_routes()]


def _unique(what: str, items: Sequence[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for key, owner in items:
        if key in seen:
            first = seen[key]
            by = f"both {first!r} and {owner!r}" if first != owner else f"{owner!r} twice"
            raise ExtensionConflict(f"{what} {key!r} is contributed by {by}")
        seen[key] = owner


def _capabilities(extensions: Sequence[Extension], has_resources: bool) -> dict[str, Any]:
    """Server capabilities for `server/discover`: every extension's, merged in order; `tools`,
    `resources` and `prompts` are declared whenever something is served under them, and
    `completions` whenever a prompt or a resource template has arguments to complete."""
    merged: dict[str, Any] = {}
    if any(e.tools for e in extensions):
        merged["tools"] = {}
    if has_resources or any(e.resource_templates for e in extensions):
        merged["resources"] = {}
    if any(e.prompts for e in extensions):
        merged["prompts"] = {}
    if any(e.prompts or e.resource_templates for e in extensions):
        merged["completions"] = {}
    entries: dict[str, Any] = {}
    for extension in extensions:
        if "extensions" in extension.capabilities:
            raise ExtensionConflict(
                f"extension {extension.name!r}: declare extension ids in `extensions`, "
                "not in `capabilities`"
            )
        _merge(merged, extension.capabilities, extension.name, "capabilities")
        for ext_id, entry in extension.extensions.items():
            if not EXTENSION_ID.fullmatch(ext_id):
                raise ExtensionConflict(
                    f"extension {extension.name!r}: {ext_id!r} is not a prefixed extension id"
                )
            if ext_id in entries:
                raise ExtensionConflict(f"extension id {ext_id!r} is contributed twice")
            entries[ext_id] = dict(entry)
    if entries:
        merged["extensions"] = entries
    return merged


def _merge(into: dict[str, Any], extra: Mapping[str, Any], owner: str, path: str) -> None:
    """Objects merge key by key; any other value must agree with what is already there."""
    for key, value in extra.items():
        here = f"{path}.{key}"
        current = into.get(key)
        if isinstance(value, Mapping) and (current is None or isinstance(current, dict)):
            into[key] = current if current is not None else {}
            _merge(into[key], value, owner, here)
        elif key in into and current != value:
            raise ExtensionConflict(f"extension {owner!r}: {here} conflicts with another extension")
        else:
            into[key] = value
