"""What a method handler may use of the server, as types: handlers depend on this view, the
dispatcher implements it, and neither module imports the other's definitions in a cycle."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from notes_server.features.extension import (
    ExtensionMethod,
    ResourceProvider,
    ResourceTemplate,
    ToolCallHook,
)

if TYPE_CHECKING:
    from notes_server.features.prompts.base import PromptRegistry
    from notes_server.protocol.envelope import EncodedResult
    from notes_server.tools.registry import ToolRegistry

__all__ = ["ResourceProvider", "ResourceTemplate", "ServerView"]


class ServerView(Protocol):
    """The server as its method handlers see it."""

    registry: ToolRegistry
    resources: ResourceProvider
    prompts: PromptRegistry
    templates: tuple[ResourceTemplate, ...]
    server_info: dict[str, Any]
    capabilities: dict[str, Any]
    # Methods the extensions serve (`tasks/get`...), and the one hook that may answer a
    # `tools/call` in the tool's stead (the Tasks extension); None: calls run as usual.
    extension_methods: Mapping[str, ExtensionMethod]
    tool_call_hook: ToolCallHook | None

    def static_result(self, key: str, build: Callable[[], dict[str, Any]]) -> EncodedResult:
        """A result identical for every request, built once."""

    def variant_result(
        self, key: str, variant: Hashable, build: Callable[[], dict[str, Any]]
    ) -> EncodedResult:
        """A result that depends on the request only through `variant`; a few kept, bounded."""
