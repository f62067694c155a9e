"""Principals: the broker names (``NAME_PATTERN[:REPLICA_ID_PATTERN]``) a broker principal may register as. A
principal that had the broker right keeps acting as any broker (``["*"]``); the others get none.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("principals") as batch:
        batch.add_column(sa.Column("broker_names", JSON, nullable=False, server_default=sa.text("'[]'")))
    principals = sa.table("principals", sa.column("broker", sa.Boolean()), sa.column("broker_names", JSON))
    op.execute(principals.update().where(principals.c.broker.is_(True)).values(broker_names=["*"]))


def downgrade() -> None:
    with op.batch_alter_table("principals") as batch:
        batch.drop_column("broker_names")
