"""The database schema's version: upgrade with Alembic, or check it is current before serving."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import migrations

ALEMBIC_INI = Path(migrations.__file__).resolve().parent / "alembic.ini"


def alembic_config(db_url: str) -> Config:
    """The packaged Alembic configuration, pointed at ``db_url``."""
    config = Config(str(ALEMBIC_INI))
    config.attributes["db_url"] = db_url
    return config


def upgrade(db_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(db_url), revision)


def downgrade(db_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(db_url), revision)


@dataclass(frozen=True)
class SchemaStatus:
    """The revisions a database is at, and the revisions the code expects."""

    current: tuple[str, ...]
    heads: tuple[str, ...]

    @property
    def up_to_date(self) -> bool:
        return set(self.current) == set(self.heads)

    def describe(self) -> str:
        current = ", ".join(self.current) or "empty (never migrated)"
        return f"database schema is at {current}; this version needs {', '.join(self.heads)}"


def schema_status(engine: Engine) -> SchemaStatus:
    heads = ScriptDirectory.from_config(Config(str(ALEMBIC_INI))).get_heads()
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    return SchemaStatus(current=tuple(sorted(current)), heads=tuple(sorted(heads)))
