"""``graymq nameserver``: run the name server; ``graymq nameserver migrate``: upgrade its database schema.

Exit codes: 0 stopped cleanly (SIGTERM) or migrated; 1 the database is unreachable or the address
is taken; 2 bad configuration (database URL, admin tokens, TLS files) or a schema that needs migrating.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from graymq.gray_controller.cli.common import READY_PREFIX, SERVER_LOG_HELP, HelpFormatter, setup_logging
from graymq.gray_controller.cli.port_holder import BIND_ERRORS, bind_failure

EXIT_UNAVAILABLE = 1
EXIT_CONFIG = 2

# Settings fields → the flag or variable that sets them, for error messages.
_SOURCES = {
    "db_url": "--db / GRAYMQ_DB_URL",
    "host": "--host / GRAYMQ_HOST",
    "port": "--port / GRAYMQ_PORT",
    "admin_tokens": "GRAYMQ_ADMIN_TOKENS",
    "tls_cert": "--tls-cert / GRAYMQ_TLS_CERT",
    "tls_key": "--tls-key / GRAYMQ_TLS_KEY",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "nameserver",
        help="run the name server (routes, grayFlags, switches, cutovers, audit)",
        description="Run the name server REST API. GRAYMQ_* variables configure it; flags override them.",
        epilog="environment (besides the variables named above):\n"
               "  GRAYMQ_ADMIN_TOKENS  admin tokens it accepts, NAME=SECRET pairs separated by commas\n"
               "  GRAYMQ_BROKER_TOKENS bootstrap broker tokens (the broker right only), NAME=SECRET pairs\n"
               + SERVER_LOG_HELP + "\n\n" + __doc__.split("\n\n", 1)[1].strip(),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--host", help="listen address (GRAYMQ_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port, 0 = any free port (GRAYMQ_PORT, default 9876)")
    parser.add_argument(
        "--db", metavar="URL",
        help="postgresql+psycopg://... or sqlite:///PATH (GRAYMQ_DB_URL, default sqlite:///./graymq-data/nameserver.db)"
    )
    parser.add_argument(
        "--migrate", action="store_true", help="upgrade the schema before serving (GRAYMQ_AUTO_MIGRATE)"
    )
    parser.add_argument(
        "--dev", action="store_true", help="dev mode: authentication off, logged as a warning (GRAYMQ_DEV_MODE)"
    )
    parser.add_argument(
        "--tls-cert", type=Path, metavar="FILE",
        help="PEM certificate: serve HTTPS only; clients then use https:// URLs (GRAYMQ_TLS_CERT; with --tls-key)",
    )
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="PEM private key of --tls-cert (GRAYMQ_TLS_KEY)")
    parser.set_defaults(handler=run)
    commands = parser.add_subparsers(dest="nameserver_command", metavar="SUBCOMMAND")
    migrate = commands.add_parser(
        "migrate",
        help="upgrade the database schema to this version (alembic upgrade head)",
        description="Upgrade the name server's database schema to the latest revision.",
    )
    migrate.add_argument("--db", metavar="URL", default=argparse.SUPPRESS, help="database (GRAYMQ_DB_URL)")
    migrate.set_defaults(handler=run_migrate)


def _fail(message: str, code: int) -> int:
    print(f"graymq nameserver: {message}", file=sys.stderr)
    return code


def _settings_error(exc: Any) -> str:
    """A pydantic ``ValidationError`` as one line per setting, naming the flag or variable to fix."""
    problems = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a check across settings: its message names them
            problems.append(message)
            continue
        field = str(error["loc"][0])
        problems.append(f"{_SOURCES.get(field, 'GRAYMQ_' + field.upper())}: {message}")
    return "invalid configuration: " + "; ".join(problems)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from graymq.migrations.schema import prepare_database
    from graymq.nameserver.server import StartupFailed, StartupRefused, serve
    from graymq.nameserver.settings import NameServerSettings

    overrides: dict[str, Any] = {"host": args.host, "port": args.port, "db_url": args.db,
                                 "tls_cert": args.tls_cert, "tls_key": args.tls_key}
    if args.migrate:
        overrides["auto_migrate"] = True
    if args.dev:
        overrides["dev_mode"] = True
    try:
        settings = NameServerSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        return _fail(_settings_error(exc), EXIT_CONFIG)
    setup_logging(settings.log_level)

    scheme = "https" if settings.tls_cert is not None else "http"

    def announce(host: str, port: int) -> None:
        address = f"{host}:{port}"
        info = {"kind": "nameserver", "address": address, "url": f"{scheme}://{address}"}
        print(READY_PREFIX + json.dumps(info), flush=True)

    try:
        serve(settings, announce, prepare_database)
    except StartupRefused as exc:
        return _fail(str(exc), EXIT_CONFIG)
    except StartupFailed as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno in BIND_ERRORS:  # the listening address
            return _fail(bind_failure(settings.host, settings.port, cause), EXIT_UNAVAILABLE)
        return _fail(str(exc), EXIT_UNAVAILABLE)
    return 0


def run_migrate(args: argparse.Namespace) -> int:
    from alembic.util import CommandError
    from pydantic import ValidationError
    from sqlalchemy.engine import make_url

    from graymq.migrations.schema import upgrade
    from graymq.nameserver.db import DB_UNAVAILABLE_ERRORS, describe_db_error
    from graymq.nameserver.settings import DatabaseSettings

    try:
        settings = DatabaseSettings(**({"db_url": args.db} if getattr(args, "db", None) else {}))
    except ValidationError as exc:
        return _fail(_settings_error(exc), EXIT_CONFIG)
    setup_logging(fmt="%(message)s", loud=("alembic",))  # its steps at INFO, quiet with GRAYMQ_LOG_LEVEL=WARNING
    shown = make_url(settings.db_url).render_as_string(hide_password=True)
    try:
        upgrade(settings.db_url)
    except DB_UNAVAILABLE_ERRORS as exc:
        return _fail(f"cannot reach the database {shown}: {describe_db_error(exc)}", EXIT_UNAVAILABLE)
    except OSError as exc:
        return _fail(f"cannot prepare the database file: {exc}", EXIT_UNAVAILABLE)
    except CommandError as exc:
        return _fail(f"cannot migrate the database: {exc}", EXIT_CONFIG)
    print(f"graymq nameserver: schema of {shown} is up to date")
    return 0
