"""Groups: how stock (RocketMQ 5) pop consumers of the group consume, as RocketMQ's subscription group says it:
``fifo`` (one message in flight per queue, in order) and ``max_attempts`` (deliveries before the dead-letter
queue, RocketMQ's default 16).

The columns are added in place, on SQLite too (a batch copy of ``groups`` would cascade-delete its rows' children).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE groups ADD COLUMN fifo BOOLEAN DEFAULT false NOT NULL")
    op.execute(
        "ALTER TABLE groups ADD COLUMN max_attempts INTEGER DEFAULT 16 NOT NULL "
        "CONSTRAINT ck_groups_max_attempts_range CHECK (max_attempts >= 1 AND max_attempts <= 1000)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE groups DROP COLUMN max_attempts")
    op.execute("ALTER TABLE groups DROP COLUMN fifo")
