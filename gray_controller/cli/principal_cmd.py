"""``graymq principal add|list|remove|rotate``: the callers the name server knows and their rights (admin)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from graymq.gray_controller.cli.common import add_nameserver_arg, print_json, run_with_nameserver, table
from graymq.protocol.errors import ConfigError, GrayMQError

if TYPE_CHECKING:
    from graymq.nameserver_api.records import PrincipalRecord, PrincipalToken


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "principal", help="add, list, remove principals and rotate their tokens (admin)",
        description="Principals are the callers of the name server and brokers: a token and rights. Patterns are "
        "globs (* any run, ? one character), e.g. ORDER_*. Sends GRAYMQ_ADMIN_TOKEN.",
    )
    sub = p.add_subparsers(dest="principal_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="create a principal and print its token (shown this once)")
    add.add_argument("name")
    add.add_argument("--produce", action="append", default=[], metavar="TOPIC_PATTERN",
                     help="may produce to matching topics (repeatable)")
    add.add_argument("--consume", action="append", default=[], metavar="GROUP_PATTERN[:TOPIC_PATTERN]",
                     help="may consume as matching groups, on matching topics (default: any topic; repeatable)")
    add.add_argument("--admin", action="store_true", help="every right, including these commands")
    add.add_argument("--broker", action="store_true",
                     help="may register brokers (GRAYMQ_BROKER_TOKEN): the broker named like the principal, unless "
                          "--broker-name says which")
    add.add_argument("--broker-name", action="append", default=None, metavar="NAME_PATTERN[:REPLICA_ID_PATTERN]",
                     help="with --broker: may register as matching broker names (and replica ids; default any), e.g. "
                          "broker-b or broker-b:1 or 'broker-*' (repeatable)")
    add.add_argument("--access-key", action="store_true",
                     help="also issue an access key and secret key with the same rights, for stock RocketMQ 5 "
                          "clients (the SDK's credentials); shown this once")
    add.add_argument("--json", action="store_true",
                     help='print {"name": ..., "token": ...} (with --access-key also "access_key", "secret_key")')
    listing = sub.add_parser("list", help="every principal and its rights (never a token)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    remove = sub.add_parser("remove", help="remove a principal: its token stops working at once")
    remove.add_argument("name")
    rotate = sub.add_parser("rotate", help="give a principal a new token (and a new secret key for its access key): "
                                           "the old ones stop working at once")
    rotate.add_argument("name")
    rotate.add_argument("--json", action="store_true",
                        help='print {"name": ..., "token": ...} (with an access key also "access_key", "secret_key")')
    for q in (add, listing, remove, rotate):
        add_nameserver_arg(q)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from graymq.protocol.acl import check_broker_right, check_consume_right, check_pattern
    from graymq.protocol.names import check_principal_name

    problems = [check_principal_name(args.name)] if hasattr(args, "name") else []
    problems += [check_pattern(p) for p in getattr(args, "produce", [])]
    problems += [check_consume_right(c) for c in getattr(args, "consume", [])]
    problems += [check_broker_right(b) for b in getattr(args, "broker_name", None) or []]
    if getattr(args, "broker_name", None) and not args.broker:
        problems.append("--broker-name needs --broker")
    if problem := next(filter(None, problems), None):
        raise ConfigError(problem)
    return run_with_nameserver(args, _run)


def _print_token(answer: PrincipalToken, as_json: bool, what: str) -> None:
    keys = {k: v for k, v in (("access_key", answer.access_key), ("secret_key", answer.secret_key)) if v}
    if as_json:
        print_json({"name": answer.name, "token": answer.token, **keys})
        return
    print(answer.token)
    print(f"{what} principal {answer.name}: the token above is shown this once; clients send it as "
          "GRAYMQ_TOKEN, brokers as GRAYMQ_BROKER_TOKEN", file=sys.stderr)
    if keys:
        print(f"access key: {keys['access_key']}\nsecret key: {keys['secret_key']}")
        print("stock RocketMQ 5 clients sign with this access key and secret key (the SDK's credentials); the "
              "secret key is shown this once", file=sys.stderr)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    from graymq.nameserver_api.client import ConflictError, NotFoundError

    command = args.principal_command
    try:
        if command == "add":
            answer = await ns.add_principal(args.name, args.produce, args.consume, args.admin, args.broker,
                                            args.broker_name, access_key=args.access_key)
            _print_token(answer, args.json, "added")
        elif command == "rotate":
            _print_token(await ns.rotate_principal(args.name), args.json, "rotated the credentials of")
        elif command == "remove":
            await ns.remove_principal(args.name)
            print(f"principal {args.name} removed: its token no longer works")
        else:
            _list(await ns.list_principals(), args.json)
    except NotFoundError as exc:
        raise GrayMQError(f"principal {args.name} does not exist") from exc
    except ConflictError as exc:
        raise GrayMQError(f"principal {args.name} already exists: remove it, or rotate its token") from exc
    return 0


def _list(principals: list[PrincipalRecord], as_json: bool) -> None:
    if as_json:
        print_json([p.to_json() for p in principals])
        return
    rows = [[p.name, ",".join(p.produce) or "-", ",".join(p.consume) or "-", "yes" if p.admin else "no",
             "yes" if p.broker else "no", ",".join(p.broker_names) or "-", p.access_key or "-"]
            for p in principals]
    print(table(rows, ["principal", "produce", "consume", "admin", "broker", "broker names", "access key"]))
