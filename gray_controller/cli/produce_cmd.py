"""``graymq produce``: send messages from arguments, a generator or stdin; one JSON line per send with --json."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from typing import Any

from graymq.gray_controller.cli.cluster_wait import until_cluster_answers
from graymq.gray_controller.cli.common import (
    add_nameserver_arg,
    add_number_arg,
    check_name_args,
    lane_of_args,
    parse_labels,
    print_json,
    seconds,
    setup_logging,
)
from graymq.gray_controller.cli.heartbeat_arg import add_heartbeat_arg, heartbeat_interval
from graymq.gray_controller.cli.lane_cmd import no_free_slot
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.operations import MAX_TIMEOUT_S

PRODUCER_HEARTBEAT_S = 2.0  # --heartbeat-interval default: ProducerSettings.heartbeat_interval_s


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "produce", help="send messages to a topic",
        description="Send messages to TOPIC: one with --body, N generated ones with --count, otherwise one per "
                    "line of stdin (the line without its newline is the body; an empty line is an empty message; "
                    "sending ends at end of input). Exit code 1 if any send failed.",
    )
    p.add_argument("topic")
    p.add_argument("--group", default="graymq-cli", help="producer group (default: graymq-cli)")
    p.add_argument("--tag", default="", help="message tag (default: none)")
    p.add_argument("--key", action="append", default=[], help="message key (repeatable)")
    p.add_argument("--gray", action="store_true", help="mark every message gray (sent to the gray queues)")
    p.add_argument("--lane", metavar="NAME", help="a producer of lane NAME marking every message NAME (sent to the "
                   "lane's queues; --gray is --lane gray)")
    p.add_argument("--client-id", help="producer client id (default host@pid@producer-xxxx)")
    p.add_argument("--label", action="append", default=[], help="client label k=v for gray rules (repeatable)")
    p.add_argument("--count", type=int, help="number of generated messages (bodies 'i:xxx...')")
    p.add_argument("--size", type=int, default=128, help="body size of generated messages in bytes (default: 128)")
    p.add_argument("--body", help="one message with this body")
    p.add_argument("--sharding-key", help="ordered messages: same key, same queue")
    add_number_arg(p, "--interval", seconds("--interval", MAX_TIMEOUT_S), default=0.0, metavar="S",
                   help="seconds between sends (default: 0)")
    p.add_argument("--json", action="store_true", help="one JSON object per send")
    add_nameserver_arg(p)
    add_heartbeat_arg(p, PRODUCER_HEARTBEAT_S)
    p.set_defaults(handler=run)


def _bodies(args: argparse.Namespace) -> Iterator[bytes]:
    if args.body is not None and args.count is not None:
        raise ConfigError("give --body or --count, not both")
    if args.body is not None:
        yield args.body.encode()
    elif args.count is not None:
        if args.count < 0 or args.size < 0:
            raise ConfigError("--count and --size must be >= 0")
        for i in range(args.count):
            head = f"{i}:".encode()
            yield head + b"x" * max(0, args.size - len(head))
    else:
        for line in sys.stdin:
            yield line.rstrip("\n").encode()


async def _until_cluster_answers(args: argparse.Namespace) -> None:
    """Wait (bounded, saying so) for a name server and a broker still coming up (``cluster_wait``)."""
    from graymq.client.config import ClientConfig
    from graymq.nameserver_api.client import NameServerClient

    config = ClientConfig.from_env(args.nameserver)
    nameserver = NameServerClient(config.nameserver, token=config.token)
    try:
        await until_cluster_answers(nameserver, "produce", need_broker=True)
    finally:
        await nameserver.close()


def run(args: argparse.Namespace) -> int:
    check_name_args(args)
    lane_of_args(args)
    args.heartbeat_interval = heartbeat_interval(args, PRODUCER_HEARTBEAT_S)
    setup_logging(default="WARNING")
    if args.body is None and args.count is None and sys.stdin.isatty():
        print("graymq produce: no --body or --count: each line typed is sent as a message; Ctrl-D ends",
              file=sys.stderr, flush=True)
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from graymq.client import Message, Producer

    bodies = _bodies(args)
    lane = lane_of_args(args)
    await _until_cluster_answers(args)
    named = None if lane in (None, "gray") else lane  # the gray lane is said as today, with gray=True
    producer = Producer(args.group, args.nameserver, client_id=args.client_id, labels=parse_labels(args.label),
                        gray=True if lane else None, lane=named, heartbeat_interval_s=args.heartbeat_interval)
    await producer.start()
    if lane is not None and (full := no_free_slot(await producer.nameserver.get_route(args.topic), lane)):
        await producer.stop()
        raise GrayMQError(full)
    failures = 0
    try:
        for body in bodies:
            message = Message(args.topic, body, tags=args.tag, keys=list(args.key), gray=True if lane else None,
                              sharding_key=args.sharding_key, lane=named)
            try:
                result = await producer.send(message)
            except Exception as exc:  # report and go on: one failed send must not hide the rest
                failures += 1
                if args.json:
                    print_json({"topic": args.topic, "status": "FAILED", "error": str(exc)})
                else:
                    print(f"FAILED {args.topic}: {exc}", file=sys.stderr)
                continue
            if args.json:
                print_json({"msg_id": result.msg_id, "topic": args.topic, "broker": result.queue.broker_name,
                            "queue_id": result.queue.queue_id, "queue_offset": result.queue_offset,
                            "status": result.status.value, "gray": result.gray,
                            "lane": result.lane or ("gray" if result.gray else None)})
            else:
                side = result.lane or ("gray" if result.gray else "normal")
                print(f"{result.status.value} {result.msg_id} {result.queue} offset={result.queue_offset} {side}",
                      flush=True)
            if args.interval:
                await asyncio.sleep(args.interval)
    finally:
        await producer.stop()
    return 1 if failures else 0
