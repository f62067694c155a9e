"""Principals: ``access_key`` and ``secret_key``, the credential stock RocketMQ 5 clients sign their calls with.

Added in place (nullable: principals from before have no access key); the access key is unique (an index, which
SQLite can add to an existing table, unlike a constraint).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE principals ADD COLUMN access_key VARCHAR(64)")
    op.execute("ALTER TABLE principals ADD COLUMN secret_key VARCHAR(128)")
    op.execute("CREATE UNIQUE INDEX ix_principals_access_key ON principals (access_key)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_principals_access_key")
    op.execute("ALTER TABLE principals DROP COLUMN secret_key")
    op.execute("ALTER TABLE principals DROP COLUMN access_key")
