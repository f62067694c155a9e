"""Engine and session setup, and the errors that mean "the database is unreachable"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

# Seconds to wait for a PostgreSQL connection before answering 503.
CONNECT_TIMEOUT_S = 2
# Seconds a request waits for a pooled connection (every one busy) before answering 503.
POOL_TIMEOUT_S = 5
READ_ONLY = "graymq_read_only"  # execution option of a connection that only reads
# Seconds SQLite waits for the write lock held by another connection.
SQLITE_BUSY_TIMEOUT_S = 30

# Raised when the server cannot be reached or drops the connection (not for bad SQL or constraint
# violations, which are bugs or races the caller handles).
DB_UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    exc.OperationalError,
    exc.InterfaceError,
    exc.TimeoutError,
)


def create_db_engine(url: str) -> Engine:
    """An engine for a (normalized) PostgreSQL or SQLite URL.

    PostgreSQL: short connect timeout and pre-ping, so a restarted server is picked up again
    without restarting the name server. SQLite: the file's directory is created, foreign keys
    are enforced, and every transaction takes the write lock at BEGIN (``BEGIN IMMEDIATE``)
    so concurrent read-then-write transactions queue instead of failing with "database is locked".
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        assert parsed.database is not None
        Path(parsed.database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        # One connection: requests queue for it in the pool (woken in order) instead of in SQLite's busy
        # handler, which polls with sleeps of up to 100 ms and collapsed under 50 clients' heartbeats.
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S}, pool_size=1, max_overflow=0,
                               pool_timeout=SQLITE_BUSY_TIMEOUT_S)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # 20 kept open: a fleet's steady load (heartbeat batches, watch reads, routes, the health sampler) has more than
    # 10 sessions at once, and each one past the pool's size opened a connection and closed it again.
    return create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=20,
        max_overflow=10,
        pool_timeout=POOL_TIMEOUT_S,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "graymq-nameserver"},
    )


def _sqlite_begin(conn: Connection) -> None:
    # A read-only session takes no lock until it reads, and in WAL mode its reads never block writers: a
    # GET whose session is closed only after the response cannot hold up the heartbeats queued behind it.
    read_only = conn.get_execution_options().get(READ_ONLY, False)
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def read_only(engine: Engine) -> Engine:
    """``engine`` for sessions that only read. PostgreSQL: the same pool. SQLite: a deferred transaction, not the
    write lock, on a pool of its own that never makes a reader wait — WAL readers do not block the writer, and a
    GET's session is closed only after its response, in another worker thread: sharing the writers' single
    connection, GETs holding it while every worker thread waited for it stalled the name server (pool timeout)
    when 30 consumers started at once."""
    if engine.dialect.name != "sqlite":
        return engine.execution_options(**{READ_ONLY: True})
    readers = create_engine(engine.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S}, pool_size=4, max_overflow=-1)
    event.listen(readers, "connect", _sqlite_on_connect)
    event.listen(readers, "begin", _sqlite_begin)
    return readers.execution_options(**{READ_ONLY: True})


def _sqlite_on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Let SQLAlchemy's "begin" listener issue BEGIN instead of the sqlite3 module.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    # WAL with synchronous=NORMAL: a commit is atomic and the file never corrupt; a power cut (not a crash
    # of the process) may lose the last commits — fine for the quick start, ten times fewer fsyncs.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit (responses are built after it)."""
    return sessionmaker(engine, expire_on_commit=False)


def upsert_insert(backend: Session | str, model: type[Any]) -> Any:
    """An ``INSERT`` for ``model`` that supports ``ON CONFLICT`` on the session's (or the named) backend."""
    name = backend if isinstance(backend, str) else backend.get_bind().dialect.name
    return postgresql.insert(model) if name == "postgresql" else sqlite.insert(model)


def describe_db_error(error: BaseException) -> str:
    """The driver's message of a database error, without SQLAlchemy's boilerplate."""
    message = str(getattr(error, "orig", None) or error).strip()
    return message.splitlines()[0] if message else type(error).__name__
