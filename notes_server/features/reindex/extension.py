"""The reindex feature through the extension seam: `notes_reindex`, served only where the
semantic index is (the `semantic` extra installed and not turned off)."""

from __future__ import annotations

from notes_server.features.extension import Extension
from notes_server.features.reindex.tool import Reindex
from notes_server.tools.services import Services


def reindex_extension(services: Services) -> Extension:
    return Extension(name="reindex", tools=[Reindex(services)])
