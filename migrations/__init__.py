"""Alembic migrations, shipped inside the package as notes_server.migrations."""
