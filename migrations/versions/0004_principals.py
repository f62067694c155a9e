"""Principals: callers with a token (stored as its SHA-256) and rights to produce, consume, administer or register.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("produce", _JSON, nullable=False),
        sa.Column("consume", _JSON, nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("broker", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_principals")),
        sa.UniqueConstraint("name", name=op.f("uq_principals_name")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_principals_token_sha256")),
    )


def downgrade() -> None:
    op.drop_table("principals")
