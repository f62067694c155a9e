"""Initial schema: brokers and their topic routes, topics, groups, clients, gray rules,
cutover operations and the audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)
RUNNING_ONLY = sa.text("state = 'RUNNING'")


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("object_type", sa.String(length=32), nullable=False),
        sa.Column("object_id", sa.String(length=255), nullable=False),
        sa.Column("group_name", sa.String(length=255), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("before", JSON, nullable=True),
        sa.Column("after", JSON, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_group_name_id", "audit_log", ["group_name", "id"])
    op.create_index("ix_audit_log_object_type_object_id", "audit_log", ["object_type", "object_id"])

    op.create_table(
        "brokers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("broker_name", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("registered_at", TIMESTAMP, nullable=False),
        sa.Column("last_heartbeat", TIMESTAMP, nullable=False),
        sa.Column("lease_expires_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_brokers")),
        sa.UniqueConstraint("broker_name", name=op.f("uq_brokers_broker_name")),
    )
    op.create_index(op.f("ix_brokers_lease_expires_at"), "brokers", ["lease_expires_at"])

    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("gray_switch", sa.Boolean(), nullable=False),
        sa.Column("orphan_policy", sa.String(length=16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint("orphan_policy IN ('hold', 'adopt')", name=op.f("ck_groups_orphan_policy")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_groups")),
        sa.UniqueConstraint("name", name=op.f("uq_groups_name")),
    )

    op.create_table(
        "topics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("queue_nums", sa.Integer(), nullable=False),
        sa.Column("gray_queue_nums", sa.Integer(), nullable=False),
        sa.Column("perm", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "gray_queue_nums >= 0 AND gray_queue_nums <= queue_nums",
            name=op.f("ck_topics_gray_queue_nums_range"),
        ),
        sa.CheckConstraint("queue_nums >= 1", name=op.f("ck_topics_queue_nums_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_topics")),
        sa.UniqueConstraint("name", name=op.f("uq_topics_name")),
    )

    op.create_table(
        "broker_topic_routes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=255), nullable=False),
        sa.Column("queue_nums", sa.Integer(), nullable=False),
        sa.Column("gray_queue_nums", sa.Integer(), nullable=False),
        sa.Column("perm", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["broker_id"],
            ["brokers.id"],
            name=op.f("fk_broker_topic_routes_broker_id_brokers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_broker_topic_routes")),
        sa.UniqueConstraint("broker_id", "topic", name=op.f("uq_broker_topic_routes_broker_id_topic")),
    )
    op.create_index(op.f("ix_broker_topic_routes_topic"), "broker_topic_routes", ["topic"])

    op.create_table(
        "clients",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("labels", JSON, nullable=False),
        sa.Column("explicit_gray", sa.Boolean(), nullable=True),
        sa.Column("gray", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("queues", JSON, nullable=False),
        sa.Column("topics", JSON, nullable=False),
        sa.Column("first_seen", TIMESTAMP, nullable=False),
        sa.Column("last_seen", TIMESTAMP, nullable=False),
        sa.CheckConstraint("role IN ('consumer', 'producer', 'spark')", name=op.f("ck_clients_role")),
        sa.CheckConstraint("state IN ('GRAY', 'DRAINING', 'NORMAL')", name=op.f("ck_clients_state")),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_clients_group_id_groups"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clients")),
        sa.UniqueConstraint("group_id", "client_id", "role", name=op.f("uq_clients_group_id_client_id_role")),
    )
    op.create_index("ix_clients_group_id_last_seen", "clients", ["group_id", "last_seen"])

    op.create_table(
        "cutover_operations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("producer_groups", JSON, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("step", sa.Text(), nullable=True),
        sa.Column("result", JSON, nullable=True),
        sa.Column("started_by", sa.String(length=255), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.CheckConstraint("kind IN ('promote', 'rollback')", name=op.f("ck_cutover_operations_kind")),
        sa.CheckConstraint("mode IN ('drain', 'adopt')", name=op.f("ck_cutover_operations_mode")),
        sa.CheckConstraint(
            "state IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED')", name=op.f("ck_cutover_operations_state")
        ),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["groups.id"],
            name=op.f("fk_cutover_operations_group_id_groups"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cutover_operations")),
    )
    op.create_index(op.f("ix_cutover_operations_group_id"), "cutover_operations", ["group_id"])
    op.create_index(
        "uq_cutover_operations_one_running",
        "cutover_operations",
        ["group_id"],
        unique=True,
        postgresql_where=RUNNING_ONLY,
        sqlite_where=RUNNING_ONLY,
    )

    op.create_table(
        "gray_rules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("selector", JSON, nullable=False),
        sa.Column("gray", sa.Boolean(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_gray_rules_group_id_groups"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gray_rules")),
    )
    op.create_index("ix_gray_rules_group_id_position", "gray_rules", ["group_id", "position"])


def downgrade() -> None:
    for table in (
        "gray_rules",
        "cutover_operations",
        "clients",
        "broker_topic_routes",
        "topics",
        "groups",
        "brokers",
        "audit_log",
    ):
        op.drop_table(table)
