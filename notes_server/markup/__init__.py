"""Pure readers of note text: links, tags and front matter properties (no database, no I/O)."""
