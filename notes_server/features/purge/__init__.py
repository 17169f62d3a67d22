"""URL-mode elicitation: the out-of-band approval page for `notes_purge`, served on the same
HTTP server as `/mcp` through the extension seam (`extension.purge_extension`)."""
