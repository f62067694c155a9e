"""Broker sets: replicas of one broker name (``broker_replicas``) and who leads them under which epoch and lease,
with the in-sync replicas (``broker_sets``). New tables only.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "broker_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("broker_name", sa.String(length=255), nullable=False),
        sa.Column("replication", sa.String(length=8), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("leader_replica_id", sa.Integer(), nullable=False),
        sa.Column("leader_lease_expires_at", TIMESTAMP, nullable=False),
        sa.Column("in_sync", JSON, nullable=False),
        sa.Column("epoch_start_offset", sa.BigInteger(), nullable=False),
        sa.Column("leader_log_end", sa.BigInteger(), nullable=False),
        sa.Column("elected_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint("replication IN ('sync', 'async')", name=op.f("ck_broker_sets_replication")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_broker_sets")),
        sa.UniqueConstraint("broker_name", name=op.f("uq_broker_sets_broker_name")),
    )
    op.create_table(
        "broker_replicas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("broker_name", sa.String(length=255), nullable=False),
        sa.Column("replica_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("log_end_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_heartbeat", TIMESTAMP, nullable=False),
        sa.Column("lease_expires_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_broker_replicas")),
        sa.UniqueConstraint("broker_name", "replica_id", name=op.f("uq_broker_replicas_broker_name_replica_id")),
    )


def downgrade() -> None:
    op.drop_table("broker_replicas")
    op.drop_table("broker_sets")
