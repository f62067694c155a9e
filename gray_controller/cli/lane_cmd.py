"""``graymq gray flag|rule|orphan|weight ... --lane NAME`` and ``gray rule --all-groups``: the lane forms of the gray
commands (docs/lanes.md). Without ``--lane`` each command does what it did before lanes; ``--lane gray`` is the
same thing said out loud."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.gray_controller.cli.common import parse_labels, print_json, table
from graymq.gray_controller.cli.text import format_labels, format_queues
from graymq.protocol.errors import ConfigError

GRAY_LANE = "gray"
LANE_CLIENTS_SHOWN = 10  # clients a lane's row of gray status names


def add_lane_arg(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--lane NAME`` (checked against the name rule with the other names, before any request)."""
    parser.add_argument("--lane", metavar="NAME", help=help_text)


def no_free_slot(route: Any, lane: str) -> str | None:
    """Why ``lane`` can take no slot of the route's topic (``core.route.TopicRoute``): every slot is held by other
    lanes; said as the name server refuses the lane's first heartbeat or send. None when it holds one or one is free."""
    slots = max((b.lane_slots for b in route.brokers if b.gray_queue_nums), default=0)
    held = dict(route.lanes or ())
    if route.lanes is None or not slots or lane in held or len(held) < slots:
        return None
    return (f"topic {route.topic} has no free lane slot ({len(held)} of {slots} held by {', '.join(sorted(held))}): "
            f"grow it (graymq topic update {route.topic} --lanes {slots + 1}) or end a lane")


async def flag(ns: Any, args: argparse.Namespace) -> int:
    """``gray flag GROUP CLIENT --lane L on|off``: on puts every role of the client in L; off (the client must be
    in L, by its flag, what it should be in or what it reports) makes it base explicitly, draining first."""
    from graymq.nameserver_api.records import FlagResult

    lane = args.lane
    if args.value == "auto":
        raise ConfigError("auto clears the client's flag whatever lane it names: give no --lane")
    if args.value == "off":
        await _require_in_lane(ns, args.group, args.client_id, lane)
    result = FlagResult.from_json(await ns.set_lane_flag(args.group, args.client_id,
                                                         lane if args.value == "on" else None, args.reason))
    desired = ", ".join(sorted({c.wanted_lane or "base" for c in result.clients})) or "unknown"
    print(f"{args.group}/{args.client_id}: explicit flag {args.value} (lane {lane}); desired now {desired}"
          + (f" (a client in {lane} drains its queues of the lane before flipping)" if args.value == "off" else ""))
    return 0


async def _require_in_lane(ns: Any, group: str, client_id: str, lane: str) -> None:
    """Refuse, in one line, taking a client out of a lane it is not in (nothing would change)."""
    from graymq.nameserver_api.client import NotFoundError

    try:
        clients = [c for c in (await ns.group_clients(group)).clients if c.client_id == client_id]
    except NotFoundError:
        clients = []
    if not clients:
        raise ConfigError(f"client {client_id} is not known in group {group}")
    lanes = {name for c in clients for name in (c.explicit_lane or (GRAY_LANE if c.explicit_gray else None),
                                                c.wanted_lane, c.in_lane)}
    if lane not in lanes:
        now = ", ".join(sorted(name or "base" for name in lanes))
        raise ConfigError(f"client {client_id} of {group} is not in lane {lane} (it is in {now}): nothing to turn "
                          "off; give the lane it is in, or no --lane")


async def rule(ns: Any, args: argparse.Namespace) -> int:
    """``gray rule [GROUP | --all-groups] --label k=v [--lane L] on|off`` and ``gray rule [GROUP | --all-groups]
    list``; ``--all-groups``: a rule of every group, after each group's own."""
    if args.value == "list":
        return await _list_rules(ns, args)
    if not args.label:
        raise ConfigError(f"rule {args.value} needs --label k=v")
    selector = parse_labels(args.label)
    lane = args.lane or GRAY_LANE
    if args.value == "on":
        if args.all_groups:
            made = await ns.add_all_groups_rule(selector, lane)
            print(f"all-groups rule #{made.id}: clients with {format_labels(selector)} are in lane {lane} in every "
                  "group (after each group's own rules)")
        else:
            made = await ns.add_lane_rule(args.group, selector, lane)
            print(f"rule #{made.id} of {args.group}: clients with {format_labels(selector)} are "
                  + ("gray" if lane == GRAY_LANE else f"in lane {lane}"))
        return 0
    whose = "all-groups rule" if args.all_groups else f"rule of {args.group}"
    removed = [r for r in await _rules(ns, args) if r.selector == selector and r.lane == lane]
    if not removed:
        raise ConfigError(f"no {whose} has exactly the selector {format_labels(selector)} and lane {lane}")
    for r in removed:
        await (ns.delete_all_groups_rule(r.id) if args.all_groups else ns.delete_rule(args.group, r.id))
    what = "all-groups rule(s)" if args.all_groups else f"rule(s) of {args.group}"
    print(f"removed {len(removed)} {what} with selector {format_labels(selector)} and lane {lane}")
    return 0


async def _rules(ns: Any, args: argparse.Namespace) -> list[Any]:
    from graymq.nameserver_api.client import NotFoundError
    from graymq.nameserver_api.lane_records import LaneRule
    from graymq.protocol.errors import GrayMQError

    if args.all_groups:
        return [r for r in await ns.list_all_groups_rules() if r.group is None]
    try:
        return [LaneRule.from_json(r) for r in await ns.request("GET", f"/v1/groups/{args.group}/rules")]
    except NotFoundError as exc:
        raise GrayMQError(f"group {args.group} is not known to the name server") from exc


async def _list_rules(ns: Any, args: argparse.Namespace) -> int:
    if args.label or args.lane:
        raise ConfigError("rule ... list takes no --label or --lane: it lists every rule")
    rules = await _rules(ns, args)
    if args.json:
        print_json([r.to_json() for r in rules])
        return 0
    if not rules:
        print("no all-groups rule" if args.all_groups else f"no rule of {args.group}")
        return 0
    print(table([[r.id, format_labels(r.selector), r.lane or "base"] for r in rules], ["id", "labels", "lane"]))
    return 0


def check_rule_target(args: argparse.Namespace) -> None:
    """``gray rule`` names a group or ``--all-groups``, not both, not neither (before any request)."""
    if args.all_groups and args.group is not None:
        raise ConfigError("give GROUP or --all-groups, not both")
    if not args.all_groups and args.group is None:
        raise ConfigError("give GROUP, or --all-groups for a rule of every group")


async def orphan(ns: Any, args: argparse.Namespace) -> int:
    """``gray orphan GROUP hold|adopt --lane L`` for a lane other than gray: the override for (group, lane)."""
    view = await ns.set_lane_orphan_policy(args.group, args.lane, args.policy, args.reason)
    what = ("the group's base consumers take its queues while no consumer of the lane is left"
            if view.orphan_policy == "adopt" else "its queues wait for a consumer of the lane")
    print(f"orphan policy of {args.group} for lane {args.lane}: {view.orphan_policy} ({what})")
    return 0


async def weight(ns: Any, args: argparse.Namespace) -> int:
    """``gray weight GROUP PERCENT --lane NAME``: the share of base queues the lane's consumers take."""
    lane = await ns.set_lane_weight(args.group, args.lane, args.percent, args.reason)
    if args.json:
        print_json(lane.to_json())
        return 0
    what = (f"its consumers of lane {args.lane} also take {args.percent}% of each subscribed topic's base queues"
            if args.percent else f"its consumers of lane {args.lane} take the lane's queues only")
    print(f"weight of lane {args.lane} in {args.group}: {args.percent}% ({what})")
    return 0


def print_lanes(lanes: list[Any]) -> None:
    """``gray status``'s table of lanes (``runbooks.group_state.LaneStatus``), once the group meets a lane other
    than gray (the lines above already describe the gray lane alone, as before lanes)."""
    if all(lane.lane == GRAY_LANE for lane in lanes):
        return
    rows = [[lane.lane, lane.state, _names(lane.clients), format_queues(map(str, lane.queues)) or "none",
             _figure(lane.backlog), _figure(lane.lag), "yes" if lane.taking_part else "no", lane.orphan_policy,
             f"{lane.weight}%"] for lane in lanes]
    print(table(rows, ["lane", "state", "clients", "queues", "backlog", "lag", "taking part", "orphans", "weight"]))


def _names(clients: list[str], shown: int = LANE_CLIENTS_SHOWN) -> str:
    """A lane's clients in its table cell: the first ``shown``, then how many more (the clients table pages them).

    >>> _names(["a (consumer)", "b (producer)", "c (consumer)"], shown=2), _names([])
    ('a (consumer), b (producer) +1 more', 'none')
    """
    more = f" +{len(clients) - shown} more" if len(clients) > shown else ""
    return (", ".join(clients[:shown]) + more) or "none"


def _figure(value: int | None) -> str:
    return "unknown" if value is None else str(value)
