"""Subcommands that are imported when they are first named, not when the command line loads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping

import click

Loader = Callable[[], click.Command]


class LazyCommands(MutableMapping[str, click.Command]):
    """A click group's `commands`: each loader runs (importing its module) the first time its
    command is looked up; iterating lists every name without loading anything."""

    def __init__(self, loaded: Mapping[str, click.Command], loaders: Mapping[str, Loader]) -> None:
        self._loaded = dict(loaded)
        self._loaders = {name: load for name, load in loaders.items() if name not in loaded}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            command = self._loaded[name] = self._loaders.pop(name)()
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaders.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if self._loaders.pop(name, None) is None:
            del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from list(self._loaders)

    def __len__(self) -> int:
        return len(self._loaded) + len(self._loaders)
