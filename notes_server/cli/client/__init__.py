"""A minimal 2026-07-28 client, used by `notes-server call` and by tests."""
