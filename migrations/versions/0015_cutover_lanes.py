"""Cutovers per lane (docs/lanes.md): an operation names the lane it promotes or rolls back (``gray`` for today's gray
side, so every row from before keeps its meaning), and at most one operation per group *and lane* runs at once, so a
promote of one lane and a rollback of another go on side by side.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUNNING_ONLY = sa.text("state = 'RUNNING'")
INDEX = "uq_cutover_operations_one_running"


def _one_running(columns: list[str]) -> None:
    op.drop_index(INDEX, table_name="cutover_operations")
    op.create_index(INDEX, "cutover_operations", columns, unique=True, postgresql_where=RUNNING_ONLY,
                    sqlite_where=RUNNING_ONLY)


def upgrade() -> None:
    op.execute("ALTER TABLE cutover_operations ADD COLUMN lane VARCHAR(255) DEFAULT 'gray' NOT NULL")
    _one_running(["group_id", "lane"])


def downgrade() -> None:
    op.execute("DELETE FROM cutover_operations WHERE lane <> 'gray'")
    _one_running(["group_id"])
    with op.batch_alter_table("cutover_operations") as batch:
        batch.drop_column("lane")
