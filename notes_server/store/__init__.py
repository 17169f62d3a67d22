"""store layer: all SQL, all driver and dialect knowledge, and the classification of
database faults, which it installs into `errors` as it loads."""

from notes_server.errors import classify_database_faults
from notes_server.store.faults import database_fault

classify_database_faults(database_fault)
