"""Alembic environment: the name server's models are the target metadata.

Called through ``graymq.migrations.schema`` (``graymq nameserver migrate``), it runs on the connection
given in ``config.attributes["connection"]``; run by hand (``alembic -c migrations/alembic.ini``)
it connects to ``GRAYMQ_DB_URL``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from graymq.nameserver.db import create_db_engine
from graymq.nameserver.models import Base
from graymq.nameserver.settings import DatabaseSettings, normalize_db_url

config = context.config
url = normalize_db_url(config.attributes.get("db_url") or DatabaseSettings().db_url)


def run_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given: Connection | None = config.attributes.get("connection")
    if given is not None:
        run_on(given)
        return
    engine = create_db_engine(url)
    try:
        with engine.connect() as connection:
            run_on(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
