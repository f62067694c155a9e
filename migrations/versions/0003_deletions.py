"""Deletions: the topics and groups operators deleted, in order, for brokers to apply at registration.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deletions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('topic', 'group')", name=op.f("ck_deletions_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deletions")),
    )


def downgrade() -> None:
    op.drop_table("deletions")
