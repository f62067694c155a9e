"""Weights per lane: ``group_lanes.weight``, 0..100 percent of each topic's base queues the group's consumers of the
lane take (docs/lanes.md, "Weights and rollouts per lane"). The ``gray`` lane's weight stays ``groups.gray_weight``,
so every row from before keeps its meaning (0: no lane but ``gray`` is weighted).

The column is added in place, on SQLite too (no copy of the table, so no cascade fires).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE group_lanes ADD COLUMN weight INTEGER DEFAULT 0 NOT NULL "
        "CONSTRAINT ck_group_lanes_weight_range CHECK (weight >= 0 AND weight <= 100)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE group_lanes DROP COLUMN weight")  # its CHECK constraint goes with it
