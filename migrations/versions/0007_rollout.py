"""Rollouts: a group's gray side can be retired (``groups.gray_retired``), clients report their consume health
(``clients.health``) and the state ``RETIRED``, and cutover records hold rollouts (kind ``rollout``, modes
``promote``/``hold``: what follows the last step).

Columns are added in place. The changed CHECK constraints are replaced in place on PostgreSQL; SQLite cannot alter
a constraint, so ``clients`` and ``cutover_operations`` are copied and renamed there, which is safe for them (no
table refers to either: no cascade fires), unlike ``groups`` (see 0006).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS_BEFORE = {
    ("clients", "state"): "state IN ('GRAY', 'DRAINING', 'NORMAL')",
    ("cutover_operations", "kind"): "kind IN ('promote', 'rollback')",
    ("cutover_operations", "mode"): "mode IN ('drain', 'adopt')",
}
CHECKS_AFTER = {
    ("clients", "state"): "state IN ('GRAY', 'DRAINING', 'NORMAL', 'RETIRED')",
    ("cutover_operations", "kind"): "kind IN ('promote', 'rollback', 'rollout')",
    ("cutover_operations", "mode"): "mode IN ('drain', 'adopt', 'promote', 'hold')",
}


def _replace_checks(checks: dict[tuple[str, str], str]) -> None:
    for table in dict.fromkeys(table for table, _ in checks):
        with op.batch_alter_table(table, recreate="auto") as batch:
            for (of_table, name), condition in checks.items():
                if of_table == table:
                    batch.drop_constraint(op.f(f"ck_{table}_{name}"), type_="check")
                    batch.create_check_constraint(op.f(f"ck_{table}_{name}"), condition)


def upgrade() -> None:
    op.execute("ALTER TABLE groups ADD COLUMN gray_retired BOOLEAN DEFAULT false NOT NULL")
    json_type = "JSONB" if op.get_bind().dialect.name == "postgresql" else "JSON"
    op.execute(f"ALTER TABLE clients ADD COLUMN health {json_type}")
    _replace_checks(CHECKS_AFTER)


def downgrade() -> None:
    op.execute("UPDATE clients SET state = 'GRAY' WHERE state = 'RETIRED'")
    op.execute("DELETE FROM cutover_operations WHERE kind = 'rollout'")
    _replace_checks(CHECKS_BEFORE)
    op.execute("ALTER TABLE clients DROP COLUMN health")
    op.execute("ALTER TABLE groups DROP COLUMN gray_retired")
