"""What an action will do, said in numbers for the confirmation (e.g. "drains 2 gray queues, 1,204 messages
left"), from the group as it is now."""

from __future__ import annotations

from graymq.nameserver.console.actions import (
    ConsoleAction,
    FlagAction,
    PromoteAction,
    RollbackAction,
    RuleAction,
    RuleDeleteAction,
    SwitchAction,
    WeightAction,
    side_name,
)
from graymq.nameserver.console.lane_view import lane_in
from graymq.nameserver.console.queue_map import QueueCell, QueueMap
from graymq.nameserver.schemas import GRAY_LANE, ClientView, GroupDetail

CONSUMING_ROLES = ("consumer", "spark")


def describe(action: ConsoleAction, detail: GroupDetail, clients: list[ClientView], qmap: QueueMap) -> str:
    if isinstance(action, PromoteAction | RollbackAction) and action.lane != GRAY_LANE:
        return _lane_cutover(action, detail, clients, qmap)
    group = detail.group
    consumers = [c for c in clients if c.role in CONSUMING_ROLES]
    gray_consumers = [c for c in consumers if c.gray]
    gray_producers = [c for c in clients if c.role == "producer" and (c.gray or c.desired_gray)]
    match action:
        case FlagAction(client_id=client_id, gray=gray, lane=lane):
            target = (lane or GRAY_LANE) if gray else None
            return _flag(detail, [c for c in clients if c.client_id == client_id], client_id, gray, target, qmap)
        case SwitchAction(enabled=False):
            return (f"turns the gray switch of {group} off: {_count(len(gray_consumers), 'gray consumer')} "
                    f"{_drain(qmap.gray_cells(), qmap, len(gray_consumers))} and turn normal; producers stop sending "
                    "gray messages")
        case SwitchAction(enabled=True):
            return (f"turns the gray switch of {group} on: clients an explicit flag or a rule makes gray turn gray "
                    "and take the gray queues")
        case RuleAction(selector=selector, gray=gray):
            return (f"adds the rule {_labels(selector)} → {'gray' if gray else 'normal'}: "
                    f"{_matching(clients, selector)} follow it unless an explicit flag or an earlier rule decides")
        case RuleDeleteAction(rule_id=rule_id):
            rule = next((r for r in detail.rules if r.id == rule_id), None)
            if rule is None:
                return f"removes rule #{rule_id} (not a rule of {group} any more)"
            return (f"removes rule #{rule_id} {_labels(rule.selector)} → {'gray' if rule.gray else 'normal'}: "
                    f"{_matching(clients, rule.selector)} fall to the next rule that matches, else normal")
        case WeightAction(weight=weight):
            normal = [cell for cell in qmap.cells() if not cell.gray]
            share = sum(round(len(cells) * weight / 100) for cells in _by_topic(normal).values())
            when = "" if gray_consumers and detail.gray_switch else " once the group has gray consumers and its " \
                "gray switch is on"
            return (f"sets the weight of {group} from {detail.gray_weight}% to {weight}%: the gray side takes "
                    f"{share} of the {len(normal)} normal queues{when}")
        case PromoteAction():
            gray_rules = [r for r in detail.rules if r.gray]
            return (f"promotes {group}: {_count(len(gray_producers), 'gray producer')} and "
                    f"{_count(len(gray_consumers), 'gray consumer')} turn normal (the consumers once they "
                    f"{_drain(qmap.gray_cells(), qmap, 2)}), {_count(len(gray_rules), 'gray rule')} removed, weight "
                    "back to 0")
        case RollbackAction(mode="drain"):
            return (f"rolls {group} back (drain): weight back to 0, {_count(len(gray_producers), 'gray producer')} "
                    f"turn normal (no new gray messages); {_count(len(gray_consumers), 'gray consumer')} "
                    f"{_drain(qmap.gray_cells(), qmap, len(gray_consumers))} and stay gray until stopped")
        case RollbackAction(mode="adopt"):
            return (f"rolls {group} back (adopt): weight back to 0, {_count(len(gray_producers), 'gray producer')} "
                    f"turn normal; once the {_count(len(gray_consumers), 'gray consumer')} stop, normal consumers "
                    f"take {_queues(qmap.gray_cells(), qmap)}; the orphan policy returns to hold after")
    raise AssertionError(f"unhandled action {action!r}")


def _flag(detail: GroupDetail, found: list[ClientView], client_id: str, gray: bool | None, target: str | None,
          qmap: QueueMap) -> str:
    """A flag's effect: ``target`` the lane it puts the client in (None: base, or no flag when ``gray`` is None)."""
    if not found:
        return f"{client_id} is not a live client of {detail.group}: the flag applies when it heartbeats again"
    if gray is None:
        return f"clears the explicit flag of {client_id}: the group's rules decide whether it is gray"
    held = [cell for cell in qmap.cells() if client_id in cell.owners]
    now = next((lane for c in found if (lane := lane_in(c)) is not None), None)
    takes = "turns gray and takes gray queues" if target == GRAY_LANE else f"enters lane {target} and takes its queues"
    if now is not None and target != now:
        then = "turns normal and takes normal queues" if target is None else takes
        return f"{client_id} {_drain([cell for cell in held if cell.gray], qmap, lane=now)}, then {then}"
    if target is not None and now is None:
        if not detail.gray_switch:
            return (f"{client_id} is flagged {side_name(True, target)}, but the gray switch of {detail.group} is off: "
                    "it stays normal")
        return f"{client_id} gives up its {_count(len(held), 'queue')}, {takes}"
    return f"{client_id} stays {side_name(gray, target)} (its flag becomes explicit)"


def _lane_cutover(action: PromoteAction | RollbackAction, detail: GroupDetail, clients: list[ClientView],
                  qmap: QueueMap) -> str:
    """A promote or rollback of a lane other than gray: only its producers, consumers, rules and queues."""
    lane, group = action.lane, detail.group
    consumers = [c for c in clients if c.role in CONSUMING_ROLES and c.lane == lane]
    producers = [c for c in clients if c.role == "producer" and lane in (c.lane, c.desired_lane)]
    cells = qmap.lane_cells(lane)
    producing = f"{_count(len(producers), lane + ' producer')} turn{'s' if len(producers) == 1 else ''} normal"
    if isinstance(action, PromoteAction):
        rules = [r for r in detail.rules if r.gray and r.lane == lane]
        return (f"promotes lane {lane} of {group}: {_count(len(producers), lane + ' producer')} and "
                f"{_count(len(consumers), lane + ' consumer')} turn normal (the consumers once they "
                f"{_drain(cells, qmap, 2, lane)}), "
                f"{_count(len(rules), lane + ' rule')} removed, the lane's slots given back; the other lanes run "
                "on untouched")
    if action.mode == "drain":
        return (f"rolls lane {lane} of {group} back (drain): {producing} (no new {lane} messages); "
                f"{_count(len(consumers), lane + ' consumer')} {_drain(cells, qmap, len(consumers), lane)} and "
                "stay in the lane until stopped; the other lanes run on untouched")
    return (f"rolls lane {lane} of {group} back (adopt): {producing}; once the "
            f"{_count(len(consumers), lane + ' consumer')} stop, base consumers take {_queues(cells, qmap, lane)}; "
            "the other lanes run on untouched")


def _drain(cells: list[QueueCell], qmap: QueueMap, subjects: int = 1, lane: str = GRAY_LANE) -> str:
    """``drains N gray queues, M messages left``, the verb agreeing with its ``subjects``."""
    return f"{'drains' if subjects == 1 else 'drain'} {_queues(cells, qmap, lane)}"


def _queues(cells: list[QueueCell], qmap: QueueMap, lane: str = GRAY_LANE) -> str:
    if any(cell.offsets is None for cell in cells):
        return f"{_count(len(cells), lane + ' queue')} (messages left unknown: a broker did not answer)"
    left = sum(cell.offsets.lag for cell in cells if cell.offsets is not None)
    return f"{_count(len(cells), lane + ' queue')}, {left:,} message{'' if left == 1 else 's'} left"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _matching(clients: list[ClientView], selector: dict[str, str]) -> str:
    ids = sorted({c.client_id for c in clients if all(c.labels.get(k) == v for k, v in selector.items())})
    if not ids:
        return "no live client matches; new ones"
    return f"the {_count(len(ids), 'client')} it matches ({', '.join(ids)})"


def _by_topic(cells: list[QueueCell]) -> dict[str, list[QueueCell]]:
    out: dict[str, list[QueueCell]] = {}
    for cell in cells:
        out.setdefault(cell.topic, []).append(cell)
    return out
