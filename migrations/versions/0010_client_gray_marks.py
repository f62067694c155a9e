"""Clients: ``gray_marks``, whether a producer reports it honours messages' gray marks (see core/gray_side.py).

Added in place (nullable, no default needed: rows written before it read as "not reported").

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE clients ADD COLUMN gray_marks BOOLEAN")


def downgrade() -> None:
    op.execute("ALTER TABLE clients DROP COLUMN gray_marks")
