"""The folders feature through the extension seam: `notes_import`, which imports the markdown
folder an operator configured for a workspace (the folder machinery loads on its first call)."""

from __future__ import annotations

from notes_server.features.extension import Extension
from notes_server.features.folders.tool import ImportFolder
from notes_server.tools.services import Services


def folders_extension(services: Services) -> Extension:
    return Extension(name="folders", tools=[ImportFolder(services)])
