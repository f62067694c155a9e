"""Alembic environment: the name server's models are the target metadata.

The database URL comes from ``config.attributes["db_url"]`` when called through
``nameserver.schema`` (the ``graymq nameserver migrate`` command), else from ``GRAYMQ_DB_URL``.
"""

from __future__ import annotations

from alembic import context

from nameserver.db import create_db_engine
from nameserver.models import Base
from nameserver.settings import DatabaseSettings, normalize_db_url

config = context.config
url = normalize_db_url(config.attributes.get("db_url") or DatabaseSettings().db_url)


def run_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = create_db_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                compare_type=True,
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
