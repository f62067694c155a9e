"""Groups: the weight (``gray_weight``, 0..100 percent of each topic's normal queues the gray consumers take).

The column is added in place, on SQLite too: a batch (copy-and-rename) of ``groups`` would drop the old
table, and with foreign keys on that deletes the group's clients, rules and cutover records by cascade.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE groups ADD COLUMN gray_weight INTEGER DEFAULT 0 NOT NULL "
        "CONSTRAINT ck_groups_gray_weight_range CHECK (gray_weight >= 0 AND gray_weight <= 100)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE groups DROP COLUMN gray_weight")  # its CHECK constraint goes with it
