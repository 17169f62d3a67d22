"""The schema as SQLAlchemy Core tables: what the Alembic migrations must match exactly.

Core, not ORM: nothing here maps rows to objects, and importing `sqlalchemy.orm` cost ~50 ms
before the first tool call of every server start.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from notes_server.store.types import UTCDateTime

metadata = MetaData()
# Aware UTC in and out (stored on SQLite as before: see store.types).
TZ = UTCDateTime()

# A note. `seq` is a stable integer key for the FTS index; `id` is the opaque public id.
notes_table = Table(
    "notes",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(40), unique=True, nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("path", String(2048), nullable=False),
    Column("title", String(500), nullable=False),
    Column("title_key", String(500), nullable=False),
    Column("body", Text, nullable=False, default=""),
    # The body's spaceless-script runs (migration 0020, `search_terms.spaceless_runs`), set
    # with the body on every write: the trigram index covers this, not the whole body.
    Column("body_spaceless", Text, nullable=False, server_default=""),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("version", Integer, nullable=False, default=1),
    Column("archived", Boolean, nullable=False, default=False),
    Column("archived_at", TZ, nullable=True),
    # Who made the current version, and with which tool (NULL for versions written before
    # history was kept): copied into its revision when the next change supersedes it.
    Column("changed_by", String(200), nullable=True),
    Column("changed_tool", String(100), nullable=True),
    UniqueConstraint("workspace", "path", name="uq_notes_workspace_path"),
    Index("ix_notes_workspace_title", "workspace", "title_key"),
    Index("ix_notes_workspace_updated", "workspace", "updated_at"),
)

# One row per link in a note's body (migrations 0014, 0024), kept in step with every write of
# the note (`store.content_index`). `target_id` is the note it resolves to in the same
# workspace, NULL while it is unresolved (missing or ambiguous); `path_key` and `title_key` are
# what it can match exactly (a markdown link has no title); `lookup_key` (`keys.lookup_key`) is
# the one indexed key by which a note created, renamed or moved finds the links that may name
# it. A backlink's context is cut from the linking note's body when read (migration 0026:
# `markup.links.context_at` of the link's position), not stored. On SQLite the table is
# WITHOUT ROWID, clustered on (note_id, position): it is its own by-note index, and a note's
# links sit on one leaf; backlinks go through a partial index of the resolved links only.
links_table = Table(
    "note_links",
    metadata,
    Column("note_id", String(40), nullable=False),
    Column("position", Integer, nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("target", String(1024), nullable=False),
    Column("heading", String(500), nullable=True),
    Column("path_key", String(2048), nullable=True),
    Column("title_key", String(2048), nullable=True),
    Column("lookup_key", String(2048), nullable=False),
    Column("target_id", String(40), nullable=True),
    PrimaryKeyConstraint("note_id", "position", name="pk_note_links"),
    Index("ix_note_links_lookup", "lookup_key", "workspace"),
    Index(
        "ix_note_links_target",
        "target_id",
        sqlite_where=text("target_id IS NOT NULL"),
        postgresql_where=text("target_id IS NOT NULL"),
    ),
    sqlite_with_rowid=False,
)

# The tags of a note (body and front matter), one row per tag key, spelled as first written in
# that note; kept with the links. WITHOUT ROWID on SQLite (migration 0024): the key is the table.
tags_table = Table(
    "note_tags",
    metadata,
    Column("note_id", String(40), primary_key=True),
    Column("tag_key", String(400), primary_key=True),
    Column("workspace", String(2048), nullable=False),
    Column("tag", String(200), nullable=False),
    Index("ix_note_tags_workspace_tag", "workspace", "tag_key"),
    sqlite_with_rowid=False,
)

# A superseded version of a note (store.history): the whole content as it was, kept in the
# transaction that replaced it. No foreign key: the confirmed delete removes a note's history
# itself, and a revision row never blocks a note's write.
revisions_table = Table(
    "note_revisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("note_id", String(40), nullable=False),
    Column("version", Integer, nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("path", String(2048), nullable=False),
    Column("title", String(500), nullable=False),
    Column("body", Text, nullable=False),
    # The kept front matter lines (note_front_matter.extra) of that version, if any.
    Column("front_matter", Text, nullable=True),
    Column("archived", Boolean, nullable=False),
    # When that version was written (its updated_at), by whom and with which tool.
    Column("changed_at", TZ, nullable=False),
    Column("principal", String(200), nullable=True),
    Column("tool", String(100), nullable=True),
    # When the next version replaced it: what `history prune --older-than` compares (no index:
    # prune is a rare operator command, and every note write would pay for one).
    Column("replaced_at", TZ, nullable=False),
    UniqueConstraint("note_id", "version", name="uq_note_revisions_note_version"),
)

grants_table = Table(
    "workspace_grants",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("principal", String(200), nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("role", String(10), nullable=False),
    Column("created_at", TZ, nullable=False),
    UniqueConstraint("principal", "workspace", name="uq_grants_principal_workspace"),
)

# One row per consumed confirmation; the primary key makes a second claim impossible.
nonces_table = Table(
    "consumed_nonces",
    metadata,
    Column("nonce", String(64), primary_key=True),
    Column("principal", String(200), nullable=False),
    Column("tool", String(100), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("answer_digest", String(64), nullable=True),
    Column("result_json", Text, nullable=True),
    Column("consumed_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=False),
    Index("ix_consumed_nonces_expires", "expires_at"),
)

audit_table = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", TZ, nullable=False),
    Column("principal", String(200), nullable=False),
    Column("tool", String(100), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("note_id", String(40), nullable=True),
    Column("note_title", String(500), nullable=True),
    Column("note_path", String(2048), nullable=True),
    # Plain column, no foreign key: pruning expired nonces must not erase the audit trail.
    Column("nonce", String(64), nullable=True),
    Index("ix_audit_log_workspace_at", "workspace", "at"),
    Index("ix_audit_log_principal_at", "principal", "at"),
)

# An HTTP bearer token. Only the SHA-256 of the secret is stored: a leaked database does not
# leak working tokens. Revocation keeps the row so `token list` shows the history.
tokens_table = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("principal", String(200), nullable=False),
    Column("name", String(200), nullable=True),
    Column("token_hash", String(64), nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=True),
    Column("revoked_at", TZ, nullable=True),
    Column("last_used_at", TZ, nullable=True),
    UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    Index("ix_api_tokens_principal", "principal"),
)

FTS_TABLE = "notes_fts"
# PostgreSQL only (migration 0008): the generated tsvector of a note and its GIN index, managed
# by raw SQL like the FTS5 table, so not part of the models.
SEARCH_VECTOR = "search_vector"
SEARCH_VECTOR_INDEX = "ix_notes_search_vector"
# Substring search for scripts written without spaces (migration 0010): on SQLite a second FTS5
# table with the trigram tokenizer (its name starts with FTS_TABLE, so it shares its handling),
# on PostgreSQL pg_trgm GIN indexes on the title and the body.
TRIGRAM_TABLE = "notes_fts_tri"
# SQLite (migration 0025): both FTS5 tables are contentless and a row's id carries its note's
# scope, `scope key * SCOPE_SHIFT + archived * ARCHIVED_SHIFT + seq`, the scope key a small
# integer per workspace from SCOPE_TABLE (claimed by the index triggers). A workspace's live notes
# are one rowid range, its live and archived ones the next-wider one.
SCOPE_TABLE = "search_scopes"
SCOPE_SHIFT = 2**41
ARCHIVED_SHIFT = 2**40
SEQ_MASK = ARCHIVED_SHIFT - 1
TRIGRAM_INDEXES = ("ix_notes_title_trgm", "ix_notes_body_spaceless_trgm")

# A 2025-11-25 Streamable HTTP session: what `initialize` negotiated, for every worker. Keyed by
# the SHA-256 of the session id (a leaked database does not leak usable ids) and bound to the
# principal that opened it; the credential on each request stays the security boundary.
http_sessions_table = Table(
    "legacy_sessions",
    metadata,
    Column("session_hash", String(64), primary_key=True),
    Column("principal", String(200), nullable=False),
    Column("version", String(20), nullable=False),
    Column("capabilities_json", Text, nullable=False),
    Column("client_info_json", Text, nullable=True),
    Column("created_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=False),
    # The client's roots (a JSON list of workspace URIs; NULL: to be asked) and how often
    # the client said they changed (an answer is stored only if none came since it was asked).
    Column("roots_json", Text, nullable=True),
    Column("roots_generation", Integer, nullable=False, server_default="0"),
    # The level `logging/setLevel` chose (NULL: no log messages for this session).
    Column("log_level", String(16), nullable=True),
    Index("ix_legacy_sessions_expires", "expires_at"),
    # Past the cap, opening a session ends the principal's least recently used (by expiry).
    Index("ix_legacy_sessions_principal_expires", "principal", "expires_at"),
)

# A 2025-11-25 HTTP session's subscribed URIs (migration 0018): the note each resolved to when
# subscribed (NULL: nothing readable, never fires) and the change-log sequence it was made at.
legacy_subscriptions_table = Table(
    "legacy_subscriptions",
    metadata,
    Column(
        "session_hash",
        String(64),
        ForeignKey("legacy_sessions.session_hash", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("uri", String(4096), primary_key=True),
    Column("note_id", String(40), nullable=True),
    Column("from_seq", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
)

# Per session: from which change-log sequence its list changes are sent (its first subscribe)
# and the id of its one current GET stream (a newer GET replaces it).
legacy_streams_table = Table(
    "legacy_streams",
    metadata,
    Column(
        "session_hash",
        String(64),
        ForeignKey("legacy_sessions.session_hash", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("list_from_seq", BigInteger().with_variant(Integer(), "sqlite"), nullable=True),
    Column("stream_id", String(64), nullable=True),
)

# A server-initiated request (elicitation/create) awaiting the client's answer, which may be
# POSTed to another worker: the answer (or a cancellation) is written here and the worker that
# holds the SSE stream reads it.
http_questions_table = Table(
    "legacy_questions",
    metadata,
    Column("session_hash", String(64), primary_key=True),
    Column("request_id", String(100), primary_key=True),
    Column("client_request", String(200), nullable=False),
    Column("response_json", Text, nullable=True),
    Column("cancelled", Boolean, nullable=False),
    Column("expires_at", TZ, nullable=False),
    Index("ix_legacy_questions_expires", "expires_at"),
)

# The folder an operator configured for a principal's workspace: the only folder the
# notes_import tool reads (a client can never name one).
mirrors_table = Table(
    "workspace_mirrors",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("principal", String(200), nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("folder", String(4096), nullable=False),
    Column("created_at", TZ, nullable=False),
    UniqueConstraint("principal", "workspace", name="uq_mirrors_principal_workspace"),
)

# Front matter lines an imported file carried beyond id/title/created/updated: kept verbatim
# and written back on export. No foreign key, like the audit log: a note's row stays the truth.
front_matter_table = Table(
    "note_front_matter",
    metadata,
    Column("note_id", String(40), primary_key=True),
    Column("extra", Text, nullable=False),
)

# What two-way sync last saw of each note, per (workspace, folder): the note's version and
# content hash in the database, and the hash of the file it wrote or read.
folder_sync_table = Table(
    "folder_sync_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workspace", String(2048), nullable=False),
    Column("folder", String(4096), nullable=False),
    Column("note_id", String(40), nullable=False),
    Column("path", String(2048), nullable=False),
    Column("db_version", Integer, nullable=False),
    Column("db_hash", String(64), nullable=False),
    Column("file_hash", String(64), nullable=False),
    Column("synced_at", TZ, nullable=False),
    UniqueConstraint("workspace", "folder", "note_id", name="uq_folder_sync_note"),
)

# A purge waiting for its out-of-band approval page (URL-mode elicitation). The exact archived
# set (ids, versions, titles) is kept here and bound to the request state by its digest; only
# the SHA-256 of the one-time link secret is stored.
purge_approvals_table = Table(
    "purge_approvals",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("principal", String(200), nullable=False),
    Column("workspace", String(2048), nullable=False),
    Column("link_hash", String(64), nullable=False),
    Column("link_used", Boolean, nullable=False),
    Column("items_json", Text, nullable=False),
    Column("set_digest", String(64), nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=False),
    Column("approved_at", TZ, nullable=True),
    # Wrong credentials typed on the approval page (any worker or instance); at
    # `approvals.MAX_ATTEMPTS` the approval is locked and can never be completed.
    Column("failed_sign_ins", Integer, nullable=False, server_default="0"),
    Index("ix_purge_approvals_expires", "expires_at"),
)

# --- the built-in OAuth authorization server (`serve --auth oauth`) ---------------------------

# A local account: the principal signs in to the consent page with this password (argon2id
# hash only). Wrong passwords are counted here, so the lockout holds on every worker/instance.
accounts_table = Table(
    "accounts",
    metadata,
    Column("principal", String(200), primary_key=True),
    Column("password_hash", String(512), nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
)

# Wrong sign-ins per typed principal name (accounts or not, so a probe learns nothing), in a
# window; `locked_until` set when the window's count reaches the limit.
sign_in_failures_table = Table(
    "oauth_sign_in_failures",
    metadata,
    Column("principal", String(200), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("window_start", TZ, nullable=False),
    Column("locked_until", TZ, nullable=True),
)

# A client: pre-registered by the operator, registered dynamically (RFC 7591) or a Client ID
# Metadata Document fetched from its https client_id (then `expires_at` ends the cached copy).
oauth_clients_table = Table(
    "oauth_clients",
    metadata,
    Column("client_id", String(2048), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("name", String(200), nullable=True),
    Column("secret_hash", String(64), nullable=True),
    Column("metadata_json", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=True),
    Column("revoked_at", TZ, nullable=True),
)

# One consent: a principal let a client use these workspaces for this resource. Every code and
# token issued from it belongs to it; revoking it (operator, code replay, refresh reuse) ends
# them all at once.
oauth_grants_table = Table(
    "oauth_grants",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("client_id", String(2048), nullable=False),
    Column("principal", String(200), nullable=False),
    Column("resource", String(2048), nullable=False),
    Column("workspaces_json", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("revoked_at", TZ, nullable=True),
    Index("ix_oauth_grants_client", "client_id"),
)

# Authorization codes (SHA-256 of the code), single use: `used_at` claimed atomically.
oauth_codes_table = Table(
    "oauth_codes",
    metadata,
    Column("code_hash", String(64), primary_key=True),
    Column("grant_id", String(40), nullable=False),
    Column("client_id", String(2048), nullable=False),
    Column("redirect_uri", String(2048), nullable=False),
    Column("code_challenge", String(128), nullable=False),
    Column("expires_at", TZ, nullable=False),
    Column("used_at", TZ, nullable=True),
)

# Access and refresh tokens (SHA-256 of the secret). A refresh token is spent (`used_at`) by
# the rotation that replaces it; presenting a spent one revokes its grant.
oauth_tokens_table = Table(
    "oauth_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("grant_id", String(40), nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=False),
    Column("used_at", TZ, nullable=True),
    Column("revoked_at", TZ, nullable=True),
    Index("ix_oauth_tokens_grant", "grant_id"),
)

# Semantic search (migration 0010): a note's passages (by heading and paragraph) and their
# vectors, the source of truth for the semantic index, each with the model that embedded it.
# Deleting the note deletes them (the foreign key, and on SQLite the trigger too).
passages_table = Table(
    "search_passages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("note_seq", Integer, ForeignKey("notes.seq", ondelete="CASCADE"), nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("section", String(200), nullable=True),
    Column("text", Text, nullable=False),
    Column("model", String(200), nullable=False),
    # float32 little-endian, unit length.
    Column("vector", LargeBinary, nullable=False),
    # The index generation (search_state) of the write that made the row (migration 0021): what
    # a process's kept vectors read again after the generation moved.
    Column("generation", BigInteger, nullable=False, server_default=text("0")),
    Index("ix_search_passages_note", "note_seq"),
    Index("ix_search_passages_generation", "generation"),
)

# The outbox of the semantic index: a row per note whose passages are to be (re)embedded,
# written by triggers in the note's own write transaction (writes never wait for the model).
# `generation` grows with every change; an indexer deletes the row only if it embedded the
# generation it claimed. `claimed_until` lets instances share the work (SKIP LOCKED).
outbox_table = Table(
    "search_outbox",
    metadata,
    Column("note_seq", Integer, primary_key=True, autoincrement=False),
    Column("generation", Integer, nullable=False),
    Column("claimed_until", TZ, nullable=True),
)
OUTBOX_TRIGGERS = ("search_outbox_ai", "search_outbox_au")

# The semantic index's generation (migration 0019): one row, bumped by every indexer write of
# passages in its own transaction, so the in-memory vectors of a workspace (store.vector_cache)
# know they are stale even when SQLite reused the ids of a re-embedded note's passages.
search_state_table = Table(
    "search_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
)

# A task of the `io.modelcontextprotocol/tasks` extension (migration 0017): durable, so any
# worker or instance answers `tasks/get`. `id` is random (unguessable); every lookup is scoped to
# `principal`. `cancel_requested` is what `tasks/cancel` sets and the running work reads between
# files; `result_json` is the final CallToolResult, `error_json` the JSON-RPC error of a failed
# one. Rows past `expires_at` are never answered and are swept.
tasks_table = Table(
    "tasks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("principal", String(200), nullable=False),
    Column("tool", String(128), nullable=False),
    Column("status", String(20), nullable=False),
    Column("status_message", Text, nullable=True),
    Column("progress_done", Integer, nullable=True),
    Column("progress_total", Integer, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    Column("cancel_requested", Boolean, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("expires_at", TZ, nullable=False),
    # When the process running it last said it was alive (migration 0022; NULL: updated_at).
    Column("alive_at", TZ, nullable=True),
    # What it asks while `input_required`, and the answers not yet taken (migration 0023).
    Column("input_requests_json", Text, nullable=True),
    Column("input_responses_json", Text, nullable=True),
    Index("ix_tasks_expires", "expires_at"),
)

# The change log (migration 0016): one row per committed note mutation, appended by triggers
# on `notes` in the writer's transaction (on PostgreSQL with a `pg_notify` of the seq), read by
# the change feed (store.changes) that serves change subscriptions. Pruned by a trigger too.
changes_table = Table(
    "note_changes",
    metadata,
    Column(
        "seq",
        BigInteger().with_variant(Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("workspace", String(2048), nullable=False),
    Column("note_id", String(40), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("previous_workspace", String(2048), nullable=True),
    Column("at", TZ, nullable=False),
    sqlite_autoincrement=True,
)
