"""Lanes (docs/lanes.md): a topic's ``lane_slots`` and the slots lanes hold (``lane_slots``), the lane a client's
explicit, declared and reported flags name, rules naming a lane or applying to every group (``gray_rules.group_id``
``NULL``), and each group's record of a lane (``group_lanes``: orphan policy override, taking part).

Every row from before keeps its meaning: ``lane_slots`` is 1 (today's layout), and a true flag with no lane is the
lane ``gray``. Columns are added in place; only ``gray_rules`` is copied on SQLite (to drop its ``NOT NULL``), which
is safe as no table refers to it (no cascade fires).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
CLIENT_LANES = ("explicit_lane", "declared_lane", "lane")


def upgrade() -> None:
    op.execute("ALTER TABLE topics ADD COLUMN lane_slots INTEGER DEFAULT 1 NOT NULL "
               "CONSTRAINT ck_topics_lane_slots_positive CHECK (lane_slots >= 1)")
    op.execute("ALTER TABLE broker_topic_routes ADD COLUMN lane_slots INTEGER DEFAULT 1 NOT NULL")
    for column in CLIENT_LANES:
        op.execute(f"ALTER TABLE clients ADD COLUMN {column} VARCHAR(255)")
    op.execute("ALTER TABLE gray_rules ADD COLUMN lane VARCHAR(255)")
    with op.batch_alter_table("gray_rules", recreate="auto") as batch:
        batch.alter_column("group_id", existing_type=sa.Integer(), nullable=True)
    op.create_table(
        "lane_slots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topic_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("lane", sa.String(length=255), nullable=False),
        sa.Column("taken_at", TIMESTAMP, nullable=False),
        sa.Column("taken_by", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(["topic_id"], ["topics.id"], name=op.f("fk_lane_slots_topic_id_topics"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lane_slots")),
        sa.UniqueConstraint("topic_id", "slot", name=op.f("uq_lane_slots_topic_id_slot")),
        sa.UniqueConstraint("topic_id", "lane", name=op.f("uq_lane_slots_topic_id_lane")),
    )
    op.create_table(
        "group_lanes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("lane", sa.String(length=255), nullable=False),
        sa.Column("orphan_policy", sa.String(length=16), nullable=True),
        sa.Column("joined_at", TIMESTAMP, nullable=True),
        sa.CheckConstraint("orphan_policy IN ('hold', 'adopt')", name=op.f("ck_group_lanes_orphan_policy")),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name=op.f("fk_group_lanes_group_id_groups"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_group_lanes")),
        sa.UniqueConstraint("group_id", "lane", name=op.f("uq_group_lanes_group_id_lane")),
    )


def downgrade() -> None:
    """Lanes fold back into the one gray side: a flag or rule naming a lane keeps its true value (gray)."""
    op.drop_table("group_lanes")
    op.drop_table("lane_slots")
    op.execute("DELETE FROM gray_rules WHERE group_id IS NULL")
    with op.batch_alter_table("gray_rules", recreate="auto") as batch:
        batch.alter_column("group_id", existing_type=sa.Integer(), nullable=False)
    op.execute("ALTER TABLE gray_rules DROP COLUMN lane")
    for column in reversed(CLIENT_LANES):
        op.execute(f"ALTER TABLE clients DROP COLUMN {column}")
    op.execute("ALTER TABLE broker_topic_routes DROP COLUMN lane_slots")
    op.execute("ALTER TABLE topics DROP COLUMN lane_slots")
