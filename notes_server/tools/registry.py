"""The tool registry: shipped tools in a fixed order, plus optional extra tool modules.

An extra module (``--tools-module``, used by test harnesses) exposes ``TOOLS``: a sequence of
Tool subclasses. Names must be unique; a clash is a startup error, never a silent override.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

from notes_server.tools.archive import ArchiveNote, RestoreNote
from notes_server.tools.base import Tool
from notes_server.tools.create import CreateNote
from notes_server.tools.delete import DeleteNote
from notes_server.tools.folder_import import ImportFolder
from notes_server.tools.move import MoveNote
from notes_server.tools.read import ReadNote
from notes_server.tools.search import SearchNotes
from notes_server.tools.services import Services
from notes_server.tools.update import UpdateNote

SHIPPED: tuple[type[Tool], ...] = (
    CreateNote,
    SearchNotes,
    ReadNote,
    UpdateNote,
    MoveNote,
    DeleteNote,
    ArchiveNote,
    RestoreNote,
    ImportFolder,
)


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
        self._listing = [tool.describe() for tool in self._tools.values()]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def listing(self) -> list[dict[str, Any]]:
        return self._listing

    def names(self) -> list[str]:
        return list(self._tools)


def extra_tool_classes(modules: Sequence[str]) -> list[type[Tool]]:
    classes: list[type[Tool]] = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        tools = getattr(module, "TOOLS", None)
        if not isinstance(tools, list | tuple):
            raise ValueError(f"tools module {module_name!r} has no TOOLS sequence")
        classes.extend(tools)
    return classes


def build_registry(services: Services, extra_modules: Sequence[str] = ()) -> ToolRegistry:
    classes = [*SHIPPED, *extra_tool_classes(extra_modules)]
    return ToolRegistry(cls(services) for cls in classes)
