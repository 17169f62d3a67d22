"""Package discovery that pyproject.toml cannot express on its own.

`notes_server.migrations` lives in the top-level `migrations/` directory (where Alembic and
`alembic.ini` expect it) but ships inside the package, so it is found there and renamed; every
other package is found under `notes_server/`. Nothing is listed by hand, so a new subpackage
cannot be left out of the wheel.
"""

from setuptools import find_packages, setup

MIGRATIONS = "notes_server.migrations"

setup(
    packages=[
        *find_packages(include=["notes_server", "notes_server.*"]),
        MIGRATIONS,
        *(f"{MIGRATIONS}.{name}" for name in find_packages("migrations")),
    ],
)
