"""The built-in OAuth authorization server: accounts, sign-in failures, clients, consents
(grants), authorization codes and tokens, all in the database so that any worker or instance
can finish a flow another began.

Branch tag w25oauth: other branches may add a 0012 in parallel; the integrator re-chains.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("principal", sa.String(200), primary_key=True),
        sa.Column("password_hash", sa.String(512), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_table(
        "oauth_sign_in_failures",
        sa.Column("principal", sa.String(200), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_start", TZ, nullable=False),
        sa.Column("locked_until", TZ, nullable=True),
    )
    op.create_table(
        "oauth_clients",
        sa.Column("client_id", sa.String(2048), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("secret_hash", sa.String(64), nullable=True),
        sa.Column("metadata_json", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=True),
        sa.Column("revoked_at", TZ, nullable=True),
    )
    op.create_table(
        "oauth_grants",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("client_id", sa.String(2048), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("resource", sa.String(2048), nullable=False),
        sa.Column("workspaces_json", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("revoked_at", TZ, nullable=True),
    )
    op.create_index("ix_oauth_grants_client", "oauth_grants", ["client_id"])
    op.create_table(
        "oauth_codes",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        sa.Column("grant_id", sa.String(40), nullable=False),
        sa.Column("client_id", sa.String(2048), nullable=False),
        sa.Column("redirect_uri", sa.String(2048), nullable=False),
        sa.Column("code_challenge", sa.String(128), nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("used_at", TZ, nullable=True),
    )
    op.create_table(
        "oauth_tokens",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("grant_id", sa.String(40), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("used_at", TZ, nullable=True),
        sa.Column("revoked_at", TZ, nullable=True),
    )
    op.create_index("ix_oauth_tokens_grant", "oauth_tokens", ["grant_id"])


def downgrade() -> None:
    op.drop_index("ix_oauth_tokens_grant", "oauth_tokens")
    op.drop_table("oauth_tokens")
    op.drop_table("oauth_codes")
    op.drop_index("ix_oauth_grants_client", "oauth_grants")
    op.drop_table("oauth_grants")
    op.drop_table("oauth_clients")
    op.drop_table("oauth_sign_in_failures")
    op.drop_table("accounts")
