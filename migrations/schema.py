"""The database schema's version: upgrade with Alembic, or check it is current before serving
(``prepare_database``, handed to the name server's ``serve`` by whoever starts it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Engine

from graymq.nameserver.db import DB_UNAVAILABLE_ERRORS, create_db_engine, describe_db_error
from graymq.nameserver.server import StartupFailed, StartupRefused
from graymq.nameserver.settings import NameServerSettings

log = logging.getLogger(__name__)

ALEMBIC_INI = Path(__file__).resolve().parent / "alembic.ini"
# PostgreSQL advisory lock key held while migrating, so replicas started together migrate once.
MIGRATION_LOCK_KEY = 0x67726D71  # "grmq"


def alembic_config(db_url: str) -> Config:
    """The packaged Alembic configuration, pointed at ``db_url``."""
    config = Config(str(ALEMBIC_INI))
    config.attributes["db_url"] = db_url
    return config


def _migrate(db_url: str, run: Callable[[Config], None]) -> None:
    """Run an Alembic command on one connection; on PostgreSQL under an advisory lock, so a second
    process migrating at the same time waits and then finds nothing left to do."""
    engine = create_db_engine(db_url)
    try:
        with engine.connect() as connection:
            locked = connection.dialect.name == "postgresql"
            if locked:
                connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
                connection.commit()  # the lock belongs to the session and outlives this transaction
            config = alembic_config(db_url)
            config.attributes["connection"] = connection
            try:
                run(config)
            finally:
                if locked:
                    connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
                    connection.commit()
    finally:
        engine.dispose()


def upgrade(db_url: str, revision: str = "head") -> None:
    _migrate(db_url, lambda config: command.upgrade(config, revision))


def downgrade(db_url: str, revision: str = "base") -> None:
    _migrate(db_url, lambda config: command.downgrade(config, revision))


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


def prepare_database(settings: NameServerSettings) -> None:
    """Make sure the schema is current: migrate when allowed, refuse otherwise."""
    engine = create_db_engine(settings.db_url)
    try:
        status = schema_status(engine)
        if status.up_to_date:
            return
        if not settings.auto_migrate:
            raise StartupRefused(
                f"{status.describe()}: run `graymq nameserver migrate --db URL` first "
                "(or start with --migrate / GRAYMQ_AUTO_MIGRATE=true)"
            )
        log.info("%s: migrating", status.describe())
        upgrade(settings.db_url)
    except CommandError as exc:  # e.g. a schema newer than this version knows
        raise StartupRefused(f"cannot migrate the database: {exc}") from exc
    except DB_UNAVAILABLE_ERRORS as exc:
        shown = engine.url.render_as_string(hide_password=True)
        raise StartupFailed(f"cannot reach the database {shown}: {describe_db_error(exc)}") from exc
    finally:
        engine.dispose()
