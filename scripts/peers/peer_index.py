"""The SDK peer's own full-text index, shared by the peer and the bench's database generator.

FTS5 with external content over `notes` (rowid = seq): the shape notes-server itself had before
its migration 0025 made its own index contentless and keyed by scope. With an index of its own
the peer keeps FTS5's `snippet()` and the plain rowid join, as a peer written on its own would.
The generator builds it in every database it makes (so that the peer's start never does), the
peer at start when it is missing. It has no triggers, so notes-server's writes to a shared
database never pay for it; the benchmarks search only generated notes, so the peer's own writes
leave it as it is.
"""

PEER_FTS = "peer_fts"
PEER_FTS_SQL = (
    f"CREATE VIRTUAL TABLE {PEER_FTS} USING fts5(title, body, content='notes',"
    " content_rowid='seq', tokenize='unicode61 remove_diacritics 2')"
)
PEER_FTS_REBUILD = f"INSERT INTO {PEER_FTS}({PEER_FTS}) VALUES ('rebuild')"
