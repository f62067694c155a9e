"""Marks frozen per lane (docs/lanes.md): a producer reports the lanes whose marks it stopped honouring because a
promote or rollback of the lane covers its producer group, so that operation waits for exactly those producers while
the marks of other lanes keep flowing (``NULL``: a client from before, whose ``gray_marks`` false covers every lane).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.add_column("clients", sa.Column("frozen_lanes", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clients") as batch:
        batch.drop_column("frozen_lanes")
