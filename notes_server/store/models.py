"""SQLAlchemy models: the schema that Alembic migrations must match exactly."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Note(Base):
    """A note. `seq` is a stable integer key for the FTS index; `id` is the opaque public id."""

    __tablename__ = "notes"
    __table_args__ = (
        UniqueConstraint("workspace", "path", name="uq_notes_workspace_path"),
        Index("ix_notes_workspace_title", "workspace", "title_key"),
        Index("ix_notes_workspace_updated", "workspace", "updated_at"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(40), unique=True, nullable=False)
    workspace: Mapped[str] = mapped_column(String(2048), nullable=False)
    path: Mapped[str] = mapped_column(String(2048), nullable=False)
    title: Mapped[str] = mapped_column(String(500), nullable=False)
    title_key: Mapped[str] = mapped_column(String(500), nullable=False)
    body: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    archived: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class WorkspaceGrant(Base):
    __tablename__ = "workspace_grants"
    __table_args__ = (
        UniqueConstraint("principal", "workspace", name="uq_grants_principal_workspace"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    workspace: Mapped[str] = mapped_column(String(2048), nullable=False)
    role: Mapped[str] = mapped_column(String(10), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class ConsumedNonce(Base):
    """One row per consumed confirmation; the primary key makes a second claim impossible."""

    __tablename__ = "consumed_nonces"
    __table_args__ = (Index("ix_consumed_nonces_expires", "expires_at"),)

    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    tool: Mapped[str] = mapped_column(String(100), nullable=False)
    outcome: Mapped[str] = mapped_column(String(20), nullable=False)
    answer_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    consumed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_workspace_at", "workspace", "at"),
        Index("ix_audit_log_principal_at", "principal", "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    tool: Mapped[str] = mapped_column(String(100), nullable=False)
    outcome: Mapped[str] = mapped_column(String(20), nullable=False)
    workspace: Mapped[str] = mapped_column(String(2048), nullable=False)
    note_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    note_title: Mapped[str | None] = mapped_column(String(500), nullable=True)
    note_path: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    # Plain column, no foreign key: pruning expired nonces must not erase the audit trail.
    nonce: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ApiToken(Base):
    """An HTTP bearer token. Only the SHA-256 of the secret is stored: a leaked database does
    not leak working tokens. Revocation keeps the row so `token list` shows the history."""

    __tablename__ = "api_tokens"
    __table_args__ = (
        UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
        Index("ix_api_tokens_principal", "principal"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


FTS_TABLE = "notes_fts"
