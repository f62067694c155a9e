"""Brokers: ``grpc_address``, where stock RocketMQ 5 clients reach the broker's gRPC endpoint (routes list it).

Added in place (nullable: a broker that serves no gRPC endpoint, or registered before it, has none).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE brokers ADD COLUMN grpc_address VARCHAR(255)")


def downgrade() -> None:
    op.execute("ALTER TABLE brokers DROP COLUMN grpc_address")
