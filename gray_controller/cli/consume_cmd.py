"""``graymq consume``: a push consumer that prints what it consumes; exits cleanly, offsets committed."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time
from datetime import datetime
from typing import Any

from graymq.gray_controller.cli.cluster_wait import until_cluster_answers
from graymq.gray_controller.cli.common import (
    NumberBound,
    add_nameserver_arg,
    add_number_arg,
    check_name_args,
    lane_of_args,
    parse_labels,
    seconds,
    setup_logging,
)
from graymq.gray_controller.cli.heartbeat_arg import add_heartbeat_arg, heartbeat_interval
from graymq.gray_controller.cli.lane_cmd import no_free_slot
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.operations import MAX_TIMEOUT_S

TOPIC_POLL_S = 1.0  # --wait-for-topic: how often the route is asked for
CONSUMER_HEARTBEAT_S = 5.0  # --heartbeat-interval default: ConsumerSettings.nameserver_interval_s


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "consume", help="consume topics as a member of a consumer group",
        description="Consume TOPIC[,TOPIC...] as a member of GROUP and print every message (one line each, or one "
                    "JSON object with --json). SIGINT/SIGTERM, --max or --idle-exit stop it after committing offsets. "
                    "Before it prints 'consuming' it checks that the name server answers and every topic exists; "
                    "that failing, or a permanent error (no permission, topic deleted), stops it with exit code 1 "
                    "after one ERROR line naming the cause.",
    )
    p.add_argument("topics", help="TOPIC[,TOPIC...]")
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument("--tag", default="*", help="tag expression, e.g. 'A||B' (default: *, every tag)")
    p.add_argument("--gray", action="store_true", help="start as a gray client (unless the name server says otherwise)")
    p.add_argument("--lane", metavar="NAME", help="start in lane NAME (unless the name server says otherwise; "
                   "--gray is --lane gray)")
    p.add_argument("--client-id", help="client id (default host@pid@consumer-xxxx)")
    p.add_argument("--label", action="append", default=[], help="client label k=v for gray rules (repeatable)")
    p.add_argument("--from", dest="from_", default="last", metavar="first|last|TIMESTAMP",
                   help="where a group with no committed offset starts: first | last | TIMESTAMP (ms since epoch "
                        "or ISO time) (default: last)")
    p.add_argument("--max", type=int, help="exit after N messages")
    add_number_arg(p, "--idle-exit", seconds("--idle-exit", MAX_TIMEOUT_S, above_zero=True), metavar="S",
                   help="exit after S seconds without a message")
    p.add_argument("--orphan-policy", choices=["hold", "adopt"],
                   help="override the group's orphan policy (default: the group's policy in the name server)")
    p.add_argument("--broadcast", action="store_true", help="broadcasting model (every client gets every message)")
    p.add_argument("--orderly", action="store_true",
                   help="consume each queue in order, one message at a time (kept through every hand-over)")
    add_number_arg(p, "--fail-rate", NumberBound("--fail-rate", 0, 1), default=0.0, metavar="F",
                   help="drills: the listener fails (reconsume later) a fraction F of the messages it gets; only "
                        "accepted messages are printed (default 0)")
    p.add_argument("--wait-for-topic", action="store_true",
                   help="wait for a topic that does not exist yet to be created (default: exit 1 saying so)")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    add_nameserver_arg(p)
    add_heartbeat_arg(p, CONSUMER_HEARTBEAT_S)
    p.set_defaults(handler=run)


def parse_from(value: str) -> tuple[str, int]:
    if value in ("first", "last"):
        return value, 0
    if value.isdigit():
        return "timestamp", int(value)
    try:
        return "timestamp", int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError as exc:
        raise ConfigError(f"--from must be first, last, ms since epoch or an ISO time, got {value!r}") from exc


def run(args: argparse.Namespace) -> int:
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    if not topics:
        raise ConfigError("no topic given")
    check_name_args(args)
    lane_of_args(args)
    if args.max is not None and args.max < 1:
        raise ConfigError("--max must be >= 1")
    consume_from, timestamp = parse_from(args.from_)
    args.heartbeat_interval = heartbeat_interval(args, CONSUMER_HEARTBEAT_S)
    setup_logging(default="WARNING")
    return asyncio.run(_run(args, topics, consume_from, timestamp))


def _error(message: str) -> int:
    print(f"graymq consume: ERROR {message}", file=sys.stderr, flush=True)
    return 1


async def _routes_ready(args: argparse.Namespace, topics: list[str], stopping: asyncio.Future[Any]) -> str | None:
    """Why consuming cannot start (None: it can): a name server that does not answer, a missing topic (waited for
    with ``--wait-for-topic``, until ``stopping``), a token that may not read the topic."""
    from graymq.client.config import ClientConfig
    from graymq.nameserver_api.client import NameServerClient
    from graymq.protocol.errors import NameServerError, TopicNotExistError

    config = ClientConfig.from_env(args.nameserver)
    nameserver = NameServerClient(config.nameserver, token=config.token)
    waiting: set[str] = set()
    try:
        await until_cluster_answers(nameserver, "consume", need_broker=True)
        for topic in topics:
            while not stopping.done():
                try:
                    route = await nameserver.get_route(topic)
                    if (lane := lane_of_args(args)) is not None and (full := no_free_slot(route, lane)):
                        return full
                    break
                except TopicNotExistError:
                    if not args.wait_for_topic:
                        return (f"topic {topic} does not exist: create it (graymq topic create) or pass "
                                "--wait-for-topic")
                    if topic not in waiting:
                        waiting.add(topic)
                        print(f"waiting for topic {topic} to be created", file=sys.stderr, flush=True)
                    await asyncio.wait({stopping}, timeout=TOPIC_POLL_S)
    except NameServerError as exc:
        return f"cannot reach the name server: {exc.message}"
    except ConfigError:
        raise
    except GrayMQError as exc:
        return exc.message
    finally:
        await nameserver.close()
    return None


class _Printer:
    """The listener: prints each message, counts them for ``--max``, fails a fraction for ``--fail-rate`` drills,
    and sets ``done`` once ``--max`` messages were printed."""

    def __init__(self, args: argparse.Namespace, done: asyncio.Event) -> None:
        self.args = args
        self.done = done
        self.seen = 0
        self.last_message = time.monotonic()
        self.consumer: Any = None  # set once built (the listener prints its client id)

    async def __call__(self, messages: list[Any]) -> Any:
        from graymq.client import ConsumeStatus

        args = self.args
        if args.fail_rate and random.random() < args.fail_rate:
            return ConsumeStatus.RECONSUME_LATER  # a drill: this batch fails, it comes again later
        for message in messages:
            if args.max is not None and self.seen >= args.max:
                await asyncio.Event().wait()  # beyond --max: left uncommitted, cancelled at stop
            self.seen += 1
            self.last_message = time.monotonic()
            _print(message, self.consumer, args.json)
            if args.max is not None and self.seen >= args.max:
                self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS


async def _run(args: argparse.Namespace, topics: list[str], consume_from: str, timestamp: int) -> int:
    from graymq.client import PushConsumer

    done = asyncio.Event()
    printer = _Printer(args, done)
    lane = lane_of_args(args)
    consumer = printer.consumer = PushConsumer(
        args.group, args.nameserver, listener=printer, client_id=args.client_id, labels=parse_labels(args.label),
        gray=True if lane else None, consume_from=consume_from, consume_timestamp_ms=timestamp,  # type: ignore[arg-type]
        orphan_policy=args.orphan_policy, broadcasting=args.broadcast, orderly=args.orderly,
        lane=None if lane in (None, "gray") else lane, nameserver_interval_s=args.heartbeat_interval,
    )
    for topic in topics:
        consumer.subscribe(topic, args.tag)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    stopping = asyncio.ensure_future(done.wait())
    checking = asyncio.ensure_future(_routes_ready(args, topics, stopping))
    await asyncio.wait({checking, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if stopping.done():  # a signal before consuming began (e.g. the name server does not answer)
        checking.cancel()
        await asyncio.gather(checking, return_exceptions=True)
        return 0
    if (problem := checking.result()) is not None:
        stopping.cancel()
        return _error(problem)
    try:
        return await _consume(args, topics, consumer, printer, stopping)
    finally:
        stopping.cancel()


async def _consume(args: argparse.Namespace, topics: list[str], consumer: Any, printer: _Printer,
                   stopping: asyncio.Future[Any]) -> int:
    """Start the consumer, consume until a signal, ``--max``, ``--idle-exit`` or a failure, stop it (offsets
    committed); the exit code."""
    starting = asyncio.ensure_future(consumer.start())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # a signal while starting (e.g. the name server does not answer)
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await consumer.stop(grace_s=0.0)
        return 0
    try:
        starting.result()
    except GrayMQError as exc:
        if consumer.failure is None:
            raise
        return _error(exc.message)
    side = consumer.lane if consumer.lane not in (None, "gray") else "gray" if consumer.gray else "normal"
    print(f"consuming {','.join(topics)} as {consumer.client_id} ({side})", file=sys.stderr, flush=True)
    failed = asyncio.ensure_future(consumer.wait_failed())
    try:
        while not (stopping.done() or failed.done()):
            idle_s = None if args.idle_exit is None else printer.last_message + args.idle_exit - time.monotonic()
            if idle_s is not None and idle_s <= 0:
                break
            await asyncio.wait({stopping, failed}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        failed.cancel()
    await consumer.stop(grace_s=5.0)
    return 0 if consumer.failure is None else 1


def _print(message: Any, consumer: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps({
            "msg_id": message.msg_id, "topic": message.topic, "broker": message.broker_name,
            "queue_id": message.queue_id, "queue_offset": message.queue_offset, "tags": message.tags,
            "keys": message.keys, "body": message.body.decode("utf-8", "replace"), "gray": message.gray,
            "client_id": consumer.client_id,
        }, sort_keys=True), flush=True)
    else:
        side = "gray" if message.gray else "normal"
        print(f"{message.broker_name}:{message.topic}:{message.queue_id}@{message.queue_offset} {side} "
              f"tags={message.tags} {message.body.decode('utf-8', 'replace')[:80]}", flush=True)
