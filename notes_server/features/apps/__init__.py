"""MCP Apps (`io.modelcontextprotocol/ui`): the notes timeline view, the tools it drives
(`notes_timeline`, `notes_open`) and the `ui://` resources hosts fetch before rendering it.
Composed as one extension (`apps.extension.apps_extension`)."""
