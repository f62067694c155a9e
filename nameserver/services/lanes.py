"""Lanes on the name server (docs/lanes.md): the slots lanes hold on topics, which group takes part in which lane,
and what a group does with a lane's queues none of its consumers serves (its orphan policy per lane)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import Conflict, NotFound
from graymq.nameserver.gray_policy import GRAY_LANE, lane_of
from graymq.nameserver.models import GrayRule, Group, GroupLane, Topic
from graymq.nameserver.repositories.clients import ClientRepository
from graymq.nameserver.repositories.groups import GroupRepository
from graymq.nameserver.repositories.lanes import LaneRepository
from graymq.nameserver.repositories.rules import RuleRepository
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import GroupLaneView, LaneOrphanPolicyPut, LaneState, TopicLanes, WeightPut
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.views import client_desired_lane
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import EVERY_GROUP, LANE_SLOTS_CHANGED, TOPIC_TABLE_CHANGED, mark_changed

SlotMaps = dict[str, dict[str, int]]  # topic -> lane -> the slot it holds


def free_slot(lane: str, lane_slots: int, held: Sequence[int]) -> int | None:
    """The slot ``lane`` takes among ``lane_slots`` of which ``held`` are taken: ``gray`` slot 0 when it is free
    (today's gray queues), any lane the lowest free one; ``None`` when all are held.

    >>> free_slot("gray", 3, [1]), free_slot("v2", 3, []), free_slot("gray", 3, [0]), free_slot("v3", 2, [0, 1])
    (0, 0, 1, None)
    """
    free = [slot for slot in range(lane_slots) if slot not in held]
    if lane == GRAY_LANE and 0 in free:
        return 0
    return free[0] if free else None


def no_free_slot(topic: str, lane_slots: int, holders: Sequence[str]) -> str:
    """The one line refusing a lane a slot of a full topic.

    >>> no_free_slot("T", 2, ["v3", "v2"])
    'topic T has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic update T --lanes 3) or end a lane'
    """
    return (f"topic {topic} has no free lane slot ({len(holders)} of {lane_slots} held by "
            f"{', '.join(sorted(holders))}): grow it (graymq topic update {topic} --lanes {lane_slots + 1}) "
            "or end a lane")


def orphan_policy_of(lane: str, override: str | None, group_policy: str, taking_part: bool) -> str:
    """What a group does with ``lane``'s queues none of its consumers serves: the override set for (group, lane),
    else for ``gray`` the group's orphan policy (as before lanes), else ``hold`` in a group taking part and
    ``adopt`` (its base consumers consume them) in one that does not.

    >>> orphan_policy_of("gray", None, "adopt", False), orphan_policy_of("v3", None, "adopt", True)
    ('adopt', 'hold')
    >>> orphan_policy_of("v3", None, "hold", False), orphan_policy_of("v3", "hold", "adopt", False)
    ('adopt', 'hold')
    """
    if override is not None:
        return override
    if lane == GRAY_LANE:
        return group_policy
    return "hold" if taking_part else "adopt"


def lane_states(group: Group, rules: Sequence[GrayRule], rows: Sequence[GroupLane],
                slots: SlotMaps) -> dict[str, LaneState]:
    """The lanes a group may meet, each as it treats them: every lane holding a slot, every lane a rule of the group
    names, every lane the group has a record of. None while its switch is off (its consumers consume every queue).

    A group takes part in a lane a true rule of its own names, or that it has joined (a flag of the group named it,
    or one of its clients was in it, since the lane began); an all-groups rule alone does not count."""
    if not group.gray_switch:
        return {}
    named = {lane_of(r.gray, r.lane) for r in rules if r.group_id == group.id} - {None}
    records = {row.lane: row for row in rows
               if row.joined_at is not None or row.orphan_policy is not None or row.weight}
    held = {lane for lanes in slots.values() for lane in lanes}
    states = {}
    for lane in sorted(held | set(named) | set(records)):
        row = records.get(lane)
        taking_part = lane in named or (row is not None and row.joined_at is not None)
        policy = orphan_policy_of(lane, row.orphan_policy if row else None, group.orphan_policy, taking_part)
        weight = group.gray_weight if lane == GRAY_LANE else (row.weight if row else 0)
        states[lane] = LaneState(orphan_policy=policy, taking_part=taking_part, weight=weight)  # type: ignore[arg-type]
    return states


def weight_sum_refusal(group: str, weights: dict[str, int]) -> str | None:
    """Why a group's lanes may not have ``weights`` (lane -> percent): more than 100 % together (each lane's share
    is taken from the base queues, docs/lanes.md); None when they may.

    >>> weight_sum_refusal("G", {"gray": 60, "v2": 50, "v3": 0})
    "the weights of G's lanes would add up to 110% (gray 60%, v2 50%): at most 100%"
    >>> weight_sum_refusal("G", {"gray": 60, "v2": 40}) is None
    True
    """
    total = sum(weights.values())
    if total <= 100:
        return None
    shown = ", ".join(f"{lane} {w}%" for lane, w in sorted(weights.items()) if w)
    return f"the weights of {group}'s lanes would add up to {total}% ({shown}): at most 100%"


def check_weights(group: Group, rows: Sequence[GroupLane], lane: str, weight: int) -> None:
    """409 when ``lane`` at ``weight`` would make the group's lanes' weights add up to more than 100 %."""
    weights = {row.lane: row.weight for row in rows if row.lane != GRAY_LANE}
    weights[GRAY_LANE] = group.gray_weight
    weights[lane] = weight
    refusal = weight_sum_refusal(group.name, weights)
    if refusal is not None:
        raise Conflict("CONFLICT", refusal)


class LaneService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.lanes = LaneRepository(session)
        self.topics = TopicRepository(session)
        self.groups = GroupRepository(session)
        self.rules = RuleRepository(session)
        self.audit = AuditService(session)

    def slot_maps(self) -> SlotMaps:
        """topic -> lane -> slot, of every slot held (one statement)."""
        maps: SlotMaps = {}
        for topic, slot, lane in self.lanes.all_slots():
            maps.setdefault(topic, {})[lane] = slot
        return maps

    def states_of(self, groups: Sequence[Group], rules: dict[int, Sequence[GrayRule]], slots: SlotMaps
                  ) -> dict[int, dict[str, LaneState]]:
        """Each group's lanes (by id) as ``lane_states`` gives them, ``rules`` by group id: one statement for all
        (none while every switch is off)."""
        rows = self.lanes.of_groups(group.id for group in groups if group.gray_switch)
        return {group.id: lane_states(group, rules[group.id], rows.get(group.id, []), slots) for group in groups}

    def take(self, topic: Topic, lane: str, taken_by: str, group: str | None = None) -> tuple[int, bool]:
        """The slot ``lane`` holds on ``topic``, taken now when it holds none (then audited, ``taken_by`` the actor):
        (slot, whether taken now). 409 ``no_free_slot`` when every slot is held by other lanes."""
        slot, held = self._slot_for(topic, lane)
        if not held:
            self._record(topic, lane, slot, taken_by, group)
        return slot, not held

    def take_on(self, topics: Sequence[Topic], lane: str, taken_by: str, group: str) -> bool:
        """``lane`` holds a slot on each of ``topics`` that has gray queues, or on none (409 naming the first full
        one, before anything is taken); whether any was taken now. Topics are locked in name order, so two takers
        lock them in one order."""
        chosen = [(topic, *self._slot_for(topic, lane))
                  for topic in sorted((t for t in topics if t.gray_queue_nums), key=lambda t: t.name)]
        for topic, slot, held in chosen:
            if not held:
                self._record(topic, lane, slot, taken_by, group)
        return any(not held for _, _, held in chosen)

    def _slot_for(self, topic: Topic, lane: str) -> tuple[int, bool]:
        """(the slot ``lane`` holds or would take on ``topic``, whether it holds it already); 409 when none is free.

        Takers of one topic are serialized by locking its row (PostgreSQL; a SQLite transaction holds the database's
        write lock): of two lanes racing for the last slot, the second reads the first's slot once it commits; the
        unique (topic, slot) and (topic, lane) constraints stand behind it."""
        held = self.lanes.slots_of(topic.id)
        if not any(row.lane == lane for row in held):
            self.topics.get(topic.name, lock=True)
            held = self.lanes.slots_of(topic.id)  # as the last taker to commit left them
        mine = next((row.slot for row in held if row.lane == lane), None)
        if mine is not None:
            return mine, True
        slot = free_slot(lane, topic.lane_slots, [row.slot for row in held])
        if slot is None:
            raise Conflict("CONFLICT", no_free_slot(topic.name, topic.lane_slots, [row.lane for row in held]))
        return slot, False

    def _record(self, topic: Topic, lane: str, slot: int, taken_by: str, group: str | None) -> None:
        """Take the slot, audited as a change of the lane (not of ``group``, whose client took it: a group's history
        lists what operators and operations did to it)."""
        began = not self.lanes.holds_any(lane)
        self.lanes.take(topic.id, slot, lane, taken_by, utc_now())
        self._slots_changed(topic.name, began, group)
        after: dict[str, object] = {"topic": topic.name, "slot": slot}
        if group is not None:
            after["group"] = group
        self.audit.record(actor=taken_by, object_type="lane", object_id=lane, action="take_slot", after=after)

    def take_by_request(self, topic_name: str, lane: str, actor: str) -> TopicLanes:
        """An operator or producer takes a slot for ``lane`` (idempotent); 404 unknown topic, 409 full or no gray
        queues."""
        topic = self._topic(topic_name)
        if not topic.gray_queue_nums:
            raise Conflict("CONFLICT", f"topic {topic.name} has no gray queues, so no lane slot: give it some "
                           f"(graymq topic update {topic.name} --gray-queues G)")
        self.take(topic, lane, actor)
        self.session.commit()
        return self.topic_lanes(topic)

    def topic_lanes(self, topic: Topic) -> TopicLanes:
        held = self.lanes.slots_of(topic.id)
        return TopicLanes(topic=topic.name, lane_slots=topic.lane_slots, lanes={row.lane: row.slot for row in held})

    def give_back(self, topic_name: str, lane: str, actor: str, reason: str | None) -> TopicLanes:
        """Free ``lane``'s slot of the topic (idempotent); 409 while a live client of any group is in the lane with
        the topic among its topics. A lane left without any slot has ended: no group takes part in it any more."""
        topic = self._topic(topic_name, lock=True)
        users = self._lane_users(topic.name, lane)
        if users:
            raise Conflict("CONFLICT", f"lane {lane} still has {len(users)} live client(s) on topic {topic.name}: "
                           f"{', '.join(users)}; move them out of the lane or stop them before freeing its slot")
        slot = self.lanes.give_back(topic.id, lane)
        if slot is not None:
            ended = not self.lanes.holds_any(lane)
            if ended:
                self.lanes.end_lane(lane)
            self._slots_changed(topic.name, ended, None)
            self.audit.record(actor=actor, object_type="lane", object_id=lane, action="free_slot",
                              before={"topic": topic.name, "slot": slot}, reason=reason)
        self.session.commit()
        return self.topic_lanes(topic)

    def _slots_changed(self, topic: str, lanes_changed: bool, group: str | None) -> None:
        """Wake what a slot of ``topic`` taken or given back changes: routes and brokers (their lane maps), and the
        watches of the groups whose answers show it.

        A group's answer shows slots in two places (``_answer``): ``lanes`` (``lane_states``) lists every lane
        holding a slot anywhere, and each of its clients' own topics carries its lane map. So when the set of lanes
        holding a slot changed (``lanes_changed``: the lane's first slot, or its last given back, which also ends
        the lane's taking part in every group) every group wakes; otherwise only the groups with a live client
        using ``topic``, and ``group`` (whose client took the slot). A client of a group watching while not live
        (silent past the expiry) reads the slot at its next heartbeat."""
        mark_changed(self.session, LANE_SLOTS_CHANGED)
        mark_changed(self.session, TOPIC_TABLE_CHANGED)  # brokers get the lane maps with the topics
        if lanes_changed:
            mark_changed(self.session, EVERY_GROUP)
            return
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        for name in self.topics.groups_using(topic, seen_after) | ({group} if group is not None else set()):
            mark_changed(self.session, name)

    def _topic(self, name: str, *, lock: bool = False) -> Topic:
        topic = self.topics.get(name, lock=lock)
        if topic is None:
            raise NotFound(f"topic {name} is unknown")
        return topic

    def _lane_users(self, topic: str, lane: str) -> list[str]:
        """'ID (ROLE of GROUP)' of every live client using ``topic`` in ``lane``, reported or desired."""
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        users, groups = [], {}
        for client, group in self.topics.live_clients_of(topic, seen_after):
            if group.id not in groups:
                groups[group.id] = self.rules.applying_to(group.id)
            if lane in (lane_of(client.gray, client.lane), client_desired_lane(client, group, groups[group.id])):
                users.append(f"{client.client_id} ({client.role} of {group.name})")
        return users

    def record_joined(self, group: Group, lanes: set[str]) -> bool:
        """The group takes part in ``lanes`` from now (a record it already has keeps its time); whether any was
        given (its watchers then wake: the lanes' orphan policies may change)."""
        if not lanes:
            return False
        self.lanes.join(group.id, lanes, utc_now())
        mark_changed(self.session, group.name)
        return True

    def set_orphan_policy(self, group_name: str, lane: str, body: LaneOrphanPolicyPut, actor: str) -> GroupLaneView:
        """Override (or, with ``None``, stop overriding) what the group does with ``lane``'s orphaned queues."""
        group = self.groups.ensure(group_name, self.settings.default_gray_switch, lock=True)
        before = next((row.orphan_policy for row in self.lanes.of_group(group.id) if row.lane == lane), None)
        self.lanes.set_orphan_policy(group.id, lane, body.policy)
        self.audit.record(actor=actor, object_type="lane", object_id=lane, action="set_orphan_policy",
                          group=group.name, before={"orphan_policy": before}, after={"orphan_policy": body.policy},
                          reason=body.reason)
        self.session.commit()
        return self._view(group, lane)

    def set_weight(self, group_name: str, lane: str, body: WeightPut, actor: str) -> GroupLaneView:
        """The percent of each topic's base queues the group's consumers of ``lane`` take (``gray``: the group's
        weight); 409 when the group's lanes' weights would add up to more than 100 %. Audited as a change of the
        lane; the group's watchers wake."""
        group = self.groups.ensure(group_name, self.settings.default_gray_switch, lock=True)
        rows = self.lanes.of_group(group.id)
        check_weights(group, rows, lane, body.weight)
        if lane == GRAY_LANE:
            before, group.gray_weight = group.gray_weight, body.weight
            group.updated_at = utc_now()
        else:
            before = next((row.weight for row in rows if row.lane == lane), 0)
            self.lanes.set_weight(group.id, lane, body.weight)
        self.audit.record(actor=actor, object_type="lane", object_id=lane, action="set_weight", group=group.name,
                          before={"weight": before}, after={"weight": body.weight}, reason=body.reason)
        self.session.commit()
        self.session.expire_all()  # the lane rows read before the upsert are stale
        return self._view(group, lane)

    def _view(self, group: Group, lane: str) -> GroupLaneView:
        """The lane as ``lanes_of`` lists it, or as a group without a record of it sees it."""
        default = GroupLaneView(lane=lane, clients=[], taking_part=False, orphan_policy=orphan_policy_of(  # type: ignore[arg-type]
            lane, None, group.orphan_policy, False), orphan_policy_override=None, slots={})
        return next((view for view in self.lanes_of(group.name) if view.lane == lane), default)

    def lanes_of(self, group_name: str) -> list[GroupLaneView]:
        """Every lane the group may meet or has clients in: its clients in it, taking part, orphan policy, slots."""
        group = self.groups.get(group_name)
        if group is None:
            raise NotFound(f"group {group_name} is unknown")
        rules = self.rules.applying_to(group.id)
        rows = self.lanes.of_group(group.id)
        slots = self.slot_maps()
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        members: dict[str, list[str]] = {}
        for client in ClientRepository(self.session).live(group.id, seen_after):
            for lane in {lane_of(client.gray, client.lane), client_desired_lane(client, group, rules)} - {None}:
                members.setdefault(str(lane), []).append(f"{client.client_id} ({client.role})")
        states = lane_states(group, rules, rows, slots)
        overrides = {row.lane: row.orphan_policy for row in rows if row.orphan_policy is not None}
        weights = {row.lane: row.weight for row in rows if row.weight and row.lane != GRAY_LANE}
        if group.gray_weight:
            weights[GRAY_LANE] = group.gray_weight
        views = []
        for lane in sorted(set(states) | set(members) | set(overrides) | set(weights)):
            state = states.get(lane) or LaneState(orphan_policy=orphan_policy_of(  # type: ignore[arg-type]
                lane, overrides.get(lane), group.orphan_policy, False), taking_part=False)
            views.append(GroupLaneView(
                lane=lane, clients=members.get(lane, []), taking_part=state.taking_part,
                orphan_policy=state.orphan_policy, orphan_policy_override=overrides.get(lane),  # type: ignore[arg-type]
                slots={topic: held[lane] for topic, held in slots.items() if lane in held},
                weight=weights.get(lane, 0)))
        return views
