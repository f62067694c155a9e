"""``graymq topic create|update|delete|list|route``: topics are configured in the name server; brokers pick them up.

A topic has room for ``--lanes K`` lanes (docs/lanes.md): K slots of its gray queue count each, slot 0 being
today's gray queues; ``topic route`` shows which lane holds which slot."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graymq.gray_controller.cli.common import (
    add_nameserver_arg,
    add_number_arg,
    add_wait_args,
    print_json,
    run_with_nameserver,
    seconds,
    table,
)
from graymq.gray_controller.cli.text import id_ranges, in_use_text
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.operations import MAX_TIMEOUT_S

DEFAULT_WAIT_S = 10.0
DEFAULT_REPLICAS_WAIT_S = 120.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("topic", help="create, delete and inspect topics",
                              description="Topics live in the name server; brokers pick them up as they register. "
                              "create and update need the admin token (GRAYMQ_ADMIN_TOKEN outside dev mode).")
    sub = p.add_subparsers(dest="topic_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create or grow a topic; returns once every live broker serves it")
    create.add_argument("topic")
    create.add_argument("--queues", type=int, required=True, help="queues per broker (a topic never shrinks)")
    create.add_argument("--gray-queues", type=int, default=0, help="gray queues per broker (first/last)")
    create.add_argument("--perm", type=int, default=6, choices=[2, 4, 6], help="2 write, 4 read, 6 both")
    create.add_argument("--lanes", type=int, default=None, metavar="K",
                        help="room for K lanes at once, --gray-queues queues each (default: 1, the gray queues)")
    update = sub.add_parser("update", help="grow a topic's room for lanes (it never shrinks)",
                            description="Give TOPIC room for K lanes at once: slots past the first are new queues "
                            "appended on every broker, so no queue changes its role.")
    update.add_argument("topic")
    update.add_argument("--lanes", type=int, required=True, metavar="K", help="lane slots (at least as many as now)")
    for q in (create, update):
        add_number_arg(q, "--wait", seconds("--wait", MAX_TIMEOUT_S), default=DEFAULT_WAIT_S, metavar="S",
                       help=f"wait up to S seconds for every live broker to serve it (default: {DEFAULT_WAIT_S:g}; "
                       "0: do not wait)")
    delete = sub.add_parser("delete", help="delete a topic no live client uses; brokers drop it")
    delete.add_argument("topic")
    delete.add_argument("--reason", default="", help="recorded in the audit log")
    route = sub.add_parser("route", help="show the brokers and queues of a topic")
    route.add_argument("topic")
    add_wait_args(route, "--wait-replicas", "N replicas serve the topic, live and in sync (a broker without "
                  "replication is one)", DEFAULT_REPLICAS_WAIT_S)
    listing = sub.add_parser("list", help="list topics")
    for q in (create, update, delete, route, listing):
        add_nameserver_arg(q)
    for q in (create, update, route, listing):
        q.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_with_nameserver(args, _run, need_broker=args.topic_command in ("create", "update", "route"))


async def _run(ns: Any, args: argparse.Namespace) -> int:
    if args.topic_command == "create":
        return await _create(ns, args)
    if args.topic_command == "update":
        return await _update(ns, args)
    if args.topic_command == "delete":
        return await _delete(ns, args)
    if args.topic_command == "route":
        return await _route(ns, args)
    topics = await ns.request("GET", "/v1/topics")
    if args.json:
        print_json(topics)
    elif any(t.get("lane_slots", 1) > 1 for t in topics):  # a lanes column once some topic has room for lanes
        print(table([[t["topic"], t["queue_nums"], t["gray_queue_nums"], t.get("perm", 6), t.get("lane_slots", 1)]
                     for t in topics], ["topic", "queues", "gray", "perm", "lanes"]))
    else:
        print(table([[t["topic"], t["queue_nums"], t["gray_queue_nums"], t.get("perm", 6)] for t in topics],
                    ["topic", "queues", "gray", "perm"]))
    return 0


async def _create(ns: Any, args: argparse.Namespace) -> int:
    """Exit 0 once every live broker serves the topic, 1 when some did not within ``--wait``."""
    from graymq.core.queue_layout import gray_queue_ids
    from graymq.nameserver_api.client import ConflictError

    if args.queues < 1:
        raise ConfigError("--queues must be >= 1")
    if not 0 <= args.wait <= 60:
        raise ConfigError("--wait must be 0 to 60 seconds")
    try:
        gray = gray_queue_ids(args.queues, args.gray_queues)
    except ValueError as exc:
        raise ConfigError(f"--gray-queues: {exc}") from exc
    if args.lanes is not None:
        return await _put_lanes(ns, args, args.queues, args.gray_queues, args.perm)
    try:
        result = await ns.put_topic(args.topic, args.queues, args.gray_queues, args.perm, wait_s=args.wait)
    except ConflictError as exc:
        detail = exc.detail if isinstance(exc.detail, dict) else {}
        if "requested_queue_nums" not in detail:
            raise _refusal(exc) from exc
        raise GrayMQError(f"topic {args.topic} has {detail['queue_nums']} queues per broker and cannot shrink to "
                          f"{detail['requested_queue_nums']}: keep --queues {detail['queue_nums']} or more, "
                          "or create a new topic") from exc
    if args.json:
        print_json(result.to_json())
    else:
        print(f"topic {args.topic}: {args.queues} queues per broker, gray queues {list(gray)}; "
              f"{_served(result.brokers_ready)}")
    _check_pending(args, result.brokers_pending)
    return 0


async def _update(ns: Any, args: argparse.Namespace) -> int:
    """``topic update TOPIC --lanes K``: the topic's layout kept, its lane slots grown (a shrink is refused)."""
    [topic] = [t for t in await ns.request("GET", "/v1/topics") if t["topic"] == args.topic] or [None]
    if topic is None:
        raise GrayMQError(f"topic {args.topic} is not known to the name server")
    return await _put_lanes(ns, args, topic["queue_nums"], topic["gray_queue_nums"], topic.get("perm", 6))


async def _put_lanes(ns: Any, args: argparse.Namespace, queues: int, gray_queues: int, perm: int) -> int:
    """Create or change a topic with room for ``--lanes`` lanes; the name server's refusal in one line."""
    from graymq.core.queue_layout import gray_queue_ids
    from graymq.nameserver_api.client import BadRequestError, ConflictError

    if args.lanes < 1:
        raise ConfigError("--lanes must be >= 1")
    if not 0 <= args.wait <= 60:
        raise ConfigError("--wait must be 0 to 60 seconds")
    if args.lanes > 1 and gray_queues < 1:
        raise ConfigError(f"--lanes {args.lanes} needs --gray-queues 1 or more (each lane has that many queues)")
    try:
        result = await ns.put_topic_lanes(args.topic, queues, gray_queues, args.lanes, perm, wait_s=args.wait)
    except ConflictError as exc:
        raise _refusal(exc) from exc
    except BadRequestError as exc:
        raise ConfigError(exc.message.split(": ", 1)[-1]) from exc
    if args.json:
        print_json(result)
    else:
        print(f"topic {args.topic}: {queues} queues per broker, gray queues "
              f"{list(gray_queue_ids(queues, gray_queues))}, room for {args.lanes} lane(s) of {gray_queues} "
              f"queue(s) each; {_served(result['brokers_ready'])}")
    _check_pending(args, result["brokers_pending"])
    return 0


def _refusal(exc: Any) -> GrayMQError:
    """The name server's one-line refusal (its detail), without the call it answered."""
    return GrayMQError(exc.detail) if isinstance(exc.detail, str) else exc


def _served(ready: Any) -> str:
    return f"served by {', '.join(ready)}" if ready else "no live broker yet (brokers pick it up as they register)"


def _check_pending(args: argparse.Namespace, pending: Any) -> None:
    if pending and args.wait:
        raise GrayMQError(f"topic {args.topic} is created, but {', '.join(pending)} did not pick it up within "
                          f"{args.wait:g} s (is the broker running and registered with this name server?)")


async def _delete(ns: Any, args: argparse.Namespace) -> int:
    from graymq.nameserver_api.client import ConflictError, NotFoundError

    try:
        await ns.delete_topic(args.topic, args.reason)
    except NotFoundError as exc:
        raise GrayMQError(f"topic {args.topic} is not known to the name server") from exc
    except ConflictError as exc:
        raise GrayMQError(in_use_text(f"topic {args.topic}", exc.detail)) from exc
    print(f"topic {args.topic} deleted; brokers drop it at their next registration")
    return 0


async def _route(ns: Any, args: argparse.Namespace) -> int:
    from graymq.nameserver_api.client import NotFoundError
    from graymq.protocol.errors import TopicNotExistError

    try:
        if args.wait_replicas is not None:
            raw = await _until_replicas(ns, args)
        else:
            raw = await ns.request("GET", f"/v1/topics/{args.topic}/route")
    except NotFoundError as exc:
        raise TopicNotExistError(f"no route for topic {args.topic}: {exc.message}") from exc
    columns = ["broker_name", "address", "queue_nums", "gray_queues", "perm", "grpc_address"]
    rows = [[b["broker_name"], b["address"], b["queue_nums"], list(_slot_ids(b, 0)), b["perm"], b.get("grpc_address")]
            for b in raw["brokers"]]
    replicas = [_replica(b, r) for b in raw["brokers"] for r in b.get("replicas") or [None]]
    refused = raw.get("refused_registrations") or []  # brokers the name server refused lately: in no route
    lanes = raw.get("lanes") or {}
    if args.json:
        brokers = [{**dict(zip(columns, r, strict=True)), "lane_slots": b.get("lane_slots", 1),
                    "slots": _slots(b, lanes)} for r, b in zip(rows, raw["brokers"], strict=True)]
        print_json({"topic": raw["topic"], "brokers": brokers, "replicas": replicas,
                    "refused_registrations": refused, "lanes": lanes})
        return 0
    headers = ["broker", "address", "queues", "gray queues", "perm", "grpc (stock clients)"]
    if not any(b.get("grpc_address") for b in raw["brokers"]):  # no gRPC endpoint anywhere: the table as it was
        rows, headers = [r[:-1] for r in rows], headers[:-1]
    else:  # a broker without one beside those with one
        rows = [[*r[:-1], r[-1] or "none"] for r in rows]
    print(table(rows, headers))
    if any(b.get("lane_slots", 1) > 1 for b in raw["brokers"]):  # a topic with room for lanes: its slots
        print(table([[b["broker_name"], s["slot"], id_ranges(s["queue_ids"]), s["lane"] or "free"]
                     for b in raw["brokers"] for s in _slots(b, lanes)], ["broker", "slot", "queues", "lane"]))
    if any(b.get("replicas") for b in raw["brokers"]):
        print(table([[r["broker_name"], r["replica_id"], r["address"], "leader" if r["leader"] else "follower",
                      "yes" if r["in_sync"] else "no", r["lag_bytes"], "yes" if r["live"] else "no"] for r in replicas],
                    ["broker", "replica", "address", "role", "in sync", "lag (bytes)", "live"]))
    for refusal in refused:
        print(f"broker {refusal['broker_name']} is in no route: {refusal['reason']}", file=sys.stderr)
    return 0


async def _until_replicas(ns: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The route once ``--wait-replicas`` replicas serve it, live and in sync; a GrayMQError after
    ``--wait-timeout``. A route not found yet counts as none ready: brokers just started may not have registered."""
    import asyncio
    import time

    from graymq.nameserver_api.client import NotFoundError

    deadline = time.monotonic() + args.wait_timeout
    said = False
    while True:
        try:
            raw = await ns.request("GET", f"/v1/topics/{args.topic}/route")
        except NotFoundError:
            if time.monotonic() >= deadline:
                raise
            raw = {"brokers": []}
        replicas = [_replica(b, r) for b in raw["brokers"] for r in b.get("replicas") or [None]]
        ready = [r for r in replicas if r["live"] and r["in_sync"]]
        if len(ready) >= args.wait_replicas:
            return raw
        if time.monotonic() >= deadline:
            raise GrayMQError(f"{len(ready)} of the {args.wait_replicas} replica(s) awaited serve {args.topic}, live "
                              f"and in sync, after {args.wait_timeout:g} s: are the brokers running (see their "
                              "logs)? --wait-timeout waits longer")
        if not said:
            print(f"waiting for {args.wait_replicas} replica(s) to serve {args.topic}, live and in sync (up to "
                  f"{args.wait_timeout:g} s)", file=sys.stderr, flush=True)
            said = True
        await asyncio.sleep(0.5)


def _slot_ids(broker: dict[str, Any], slot: int) -> tuple[int, ...]:
    """The queue ids of a lane slot on a broker of the route (slot 0: the gray queues)."""
    from graymq.core.queue_layout import slot_queue_ids

    return slot_queue_ids(broker["queue_nums"], broker["gray_queue_nums"], broker.get("lane_slots", 1), slot)


def _slots(broker: dict[str, Any], lanes: dict[str, int]) -> list[dict[str, Any]]:
    """Each lane slot of a broker of the route: its queue ids and the lane holding it (None: free)."""
    holders = {slot: lane for lane, slot in lanes.items()}
    if not broker["gray_queue_nums"]:
        return []
    return [{"slot": slot, "queue_ids": list(_slot_ids(broker, slot)), "lane": holders.get(slot)}
            for slot in range(broker.get("lane_slots", 1))]


def _replica(broker: dict[str, Any], replica: dict[str, Any] | None) -> dict[str, Any]:
    """One replica of a broker as ``topic route --json`` lists it; a broker without replicas is its own leader."""
    if replica is None:
        return {"broker_name": broker["broker_name"], "replica_id": 0, "address": broker["address"], "leader": True,
                "in_sync": True, "live": True, "log_end_offset": None, "lag_bytes": 0}
    return {"broker_name": broker["broker_name"], **{k: replica[k] for k in (
        "replica_id", "address", "leader", "in_sync", "live", "log_end_offset", "lag_bytes")}}
