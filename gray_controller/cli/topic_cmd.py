"""``graymq topic create|list|route``: topics are configured in the name server; brokers pick them up."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.gray_controller.cli.common import add_nameserver_arg, print_json, run_with_nameserver, table
from graymq.protocol.errors import ConfigError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("topic", help="create and inspect topics")
    sub = p.add_subparsers(dest="topic_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create or update a topic (reaches every broker within seconds)")
    create.add_argument("topic")
    create.add_argument("--queues", type=int, required=True, help="queues per broker")
    create.add_argument("--gray-queues", type=int, default=0, help="gray queues per broker (first/last)")
    create.add_argument("--perm", type=int, default=6, choices=[2, 4, 6], help="2 write, 4 read, 6 both")
    route = sub.add_parser("route", help="show the brokers and queues of a topic")
    route.add_argument("topic")
    listing = sub.add_parser("list", help="list topics")
    for q in (create, route, listing):
        add_nameserver_arg(q)
        q.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_with_nameserver(args, _run)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    from graymq.protocol.gray import gray_queue_ids

    if args.topic_command == "create":
        if args.queues < 1:
            raise ConfigError("--queues must be >= 1")
        try:
            gray = gray_queue_ids(args.queues, args.gray_queues)
        except ValueError as exc:
            raise ConfigError(f"--gray-queues: {exc}") from exc
        result = await ns.put_topic(args.topic, args.queues, args.gray_queues, args.perm)
        if args.json:
            print_json(result)
        else:
            print(f"topic {args.topic}: {args.queues} queues per broker, gray queues {list(gray)}")
    elif args.topic_command == "route":
        route = await ns.get_route(args.topic)
        rows = [[b.broker_name, b.address, b.queue_nums, list(gray_queue_ids(b.queue_nums, b.gray_queue_nums)),
                 b.perm] for b in route.brokers]
        if args.json:
            print_json({"topic": route.topic, "brokers": [dict(zip(
                ["broker_name", "address", "queue_nums", "gray_queues", "perm"], r, strict=True)) for r in rows]})
        else:
            print(table(rows, ["broker", "address", "queues", "gray queues", "perm"]))
    else:
        topics = await ns.request("GET", "/v1/topics")
        if args.json:
            print_json(topics)
        else:
            print(table([[t["topic"], t["queue_nums"], t["gray_queue_nums"], t.get("perm", 6)] for t in topics],
                        ["topic", "queues", "gray", "perm"]))
    return 0
