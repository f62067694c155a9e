"""Client heartbeats, the group's client table, and operators' per-client grayFlags."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from graymq.nameserver.auth import Caller, check_gray_producer, names_producer_group
from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import ApiError, Conflict, Forbidden, NotFound
from graymq.nameserver.gray_policy import lane_of
from graymq.nameserver.models import RUNNING, Client, CutoverOperation, GrayRule, Group, Topic
from graymq.nameserver.repositories.clients import ClientBinding, ClientRepository
from graymq.nameserver.repositories.cutovers import CutoverRepository
from graymq.nameserver.repositories.groups import GroupRepository
from graymq.nameserver.repositories.rules import RuleRepository
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import (
    ClientAlive,
    ClientCount,
    ClientHeartbeat,
    ClientHeartbeatResponse,
    ClientWatch,
    FlagPut,
    FlagResult,
    GroupClients,
    LaneState,
    QueueCounts,
)
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.heartbeat_batch import apply_report, settled_row
from graymq.nameserver.services.lanes import LaneService, SlotMaps
from graymq.nameserver.services.views import (
    client_desired_lane,
    client_view,
    cutover_view,
    total_queue_nums,
)
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import mark_changed
from graymq.protocol.operations import PAST_WEIGHT_STEPS

log = logging.getLogger(__name__)

Stored = tuple[ClientHeartbeatResponse, int]  # a heartbeat's answer and its client row's id (its alive id)


@dataclass
class SharedReads:
    """What a batch's heartbeats going one by one (``ClientService.stored``) read once for all of them: their groups
    by name, and each group's answer context over every topic of theirs (a producer among them: with the frozen
    producer groups), read at its first use and dropped when a lane entered changed it."""

    groups: dict[str, Group]
    topic_names: set[str]
    producers: bool
    contexts: dict[int, AnswerContext] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerContext:
    """What the heartbeat answers of a group's clients share, read once: the rules (the group's, then all groups'),
    topics (a superset of the clients'), the producer groups a running promote or rollback freezes, the slots lanes
    hold, and the group's lanes."""

    rules: Sequence[GrayRule]
    topics: Sequence[Topic]
    frozen: dict[str, set[str]]  # producer group -> the lanes whose RUNNING promote or rollback covers it
    slots: SlotMaps
    lanes: dict[str, LaneState]


@dataclass(frozen=True)
class GroupViews:
    """Each live client's heartbeat answer in one group (``ClientService.group_views``), for its watches."""

    group: str
    binding: Callable[[Caller], ClientBinding]
    answers: dict[tuple[str, str], tuple[Client, ClientHeartbeatResponse]]  # (client id, role) -> row, answer

    def view(self, watch: ClientWatch, caller: Caller) -> ClientHeartbeatResponse | None:
        """The watched client's answer as ``ClientService.view`` gives it; None for a client not live here."""
        entry = self.answers.get((watch.client_id, watch.role))
        if entry is None:
            return None
        client, answer = entry
        if not self.binding(caller).allows(client):
            raise ClientService._taken(caller, self.group, client)
        return for_caller(answer, caller)


def for_caller(answer: ClientHeartbeatResponse, caller: Caller) -> ClientHeartbeatResponse:
    """A producer whose principal has no right naming its producer group stays out of the group's release: normal,
    marks not honoured (``names_producer_group``), so it can neither send gray nor hold up a promote."""
    if answer.role != "producer" or names_producer_group(caller.rights, answer.group):
        return answer
    return answer.model_copy(update={"desired_gray": False, "gray_marks": False, "lane_marks": False,
                                     "desired_lane": None})


class ClientService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.groups = GroupRepository(session)
        self.clients = ClientRepository(session)
        self.rules = RuleRepository(session)
        self.topics = TopicRepository(session)
        self.cutovers = CutoverRepository(session)
        self.audit = AuditService(session)
        self.lanes = LaneService(session, settings)

    def _seen_after(self) -> datetime:
        return utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)

    def _binding(self, caller: Caller) -> ClientBinding:
        """The caller's binding: enforced for every caller but admins; in dev mode nothing is bound."""
        dev_mode = self.settings.dev_mode
        return ClientBinding(principal=None if dev_mode else caller.name,
                             enforce=not dev_mode and not caller.rights.admin, expired_before=self._seen_after())

    @staticmethod
    def _taken(caller: Caller, group: str, client: Client) -> Forbidden:
        """403 ``FORBIDDEN: principal NAME may not act as client ID (ROLE) of group G: it belongs to principal P``."""
        return Forbidden(detail=f"principal {caller.name} may not act as client {client.client_id} ({client.role}) "
                                f"of group {group}: it belongs to principal {client.principal}")

    def heartbeat(self, report: ClientHeartbeat, caller: Caller) -> ClientHeartbeatResponse:
        """Store what the client reports and tell it the flag it should have (``stored``)."""
        return self.stored(report, caller)[0]

    def stored(self, report: ClientHeartbeat, caller: Caller, shared: SharedReads | None = None) -> Stored:
        """Store what the client reports and tell it the flag it should have; with its row's id. ``shared``: its
        group and answer context as a batch read them for all its heartbeats going this way.

        The group is created on first contact with ``GRAYMQ_DEFAULT_GRAY_SWITCH``. The reported
        ``gray``/``state`` are stored as given: a client is flipped only by itself (after draining).
        The first heartbeat binds the client to the caller; 403 for a live client another principal
        registered (``ClientBinding``), in any role: a client id live as another principal's consumer is not
        this caller's to use as a producer or spark job either. Checked and bound under the client id's lock
        (``ClientRepository.lock_client_id``): of two first heartbeats at once, the second gets that 403.
        """
        if report.role == "producer":
            check_gray_producer(caller, report.group, report.gray, report.declared_gray, report.gray_marks)
        group = shared.groups[report.group] if shared is not None else self.groups.ensure(report.group,
                                                                                self.settings.default_gray_switch)
        binding = self._binding(caller)
        if binding.enforce:
            self.clients.lock_client_id(group.id, report.client_id)
            for other in self.clients.of_client(group.id, report.client_id):
                if other.role != report.role and not binding.allows(other):
                    raise self._taken(caller, group.name, other)
        now = utc_now()
        client = self.clients.upsert(group.id, report, now, binding)
        if client is None:
            [taken] = [c for c in self.clients.of_client(group.id, report.client_id) if c.role == report.role]
            raise self._taken(caller, group.name, taken)
        context = (self._shared_context(shared, group) if shared is not None
                   else self._context(group, client.topics or (), client.role == "producer"))
        response = for_caller(self._answer(group, client, context), caller)
        try:
            entered = self._enter_lane(group, client, response.desired_lane, context)
        except Conflict:
            if client.first_seen == now:
                self.session.rollback()  # a client refused at its first heartbeat is not registered
            else:
                self.session.commit()  # one already registered keeps its row (and stays live)
            raise
        if entered:
            if shared is not None:
                shared.contexts.pop(group.id, None)  # its slots or lanes changed
            context = self._context(group, client.topics or (), client.role == "producer")
            response = for_caller(self._answer(group, client, context), caller)
        self.session.commit()
        return response, client.id

    def _shared_context(self, shared: SharedReads, group: Group) -> AnswerContext:
        """``group``'s answer context for every topic of ``shared``'s batch, read at its first use."""
        if group.id not in shared.contexts:
            shared.contexts[group.id] = self._context(group, shared.topic_names, shared.producers)
        return shared.contexts[group.id]

    def heartbeats(self, reports: Sequence[ClientHeartbeat], caller: Caller) -> list[Stored | ApiError]:
        """Store and answer several clients' heartbeats, each as ``stored`` would (its answer and row id, or the
        error it would raise), in their order.

        Those of settled clients (``heartbeat_batch.settled_row``) whose answer enters no lane are stored in one
        transaction, in a constant number of statements: their rows read together, unchanged reports only
        refreshing ``last_seen``, the answers' group-level parts read once per batch. The others (first heartbeats,
        claims) go one by one through ``stored``, each committed or rolled back on its own, sharing the reads of
        their groups and answer contexts (``SharedReads``)."""
        if not reports:
            return []
        results: list[Stored | ApiError | None] = [None] * len(reports)
        groups = self._store_settled(reports, caller, results)
        rest = [report for report, result in zip(reports, results, strict=True) if result is None]
        shared = SharedReads(groups, {t for report in rest for t in report.topics},
                             any(report.role == "producer" for report in rest))
        for index, report in enumerate(reports):
            if results[index] is None:
                try:
                    results[index] = self.stored(report, caller, shared)
                except ApiError as refused:
                    self.session.rollback()
                    results[index] = refused
        return [result for result in results if result is not None]

    def _store_settled(self, reports: Sequence[ClientHeartbeat], caller: Caller,
                       results: list[Stored | ApiError | None]) -> dict[str, Group]:
        """Answer in ``results`` (by index) and store in one transaction the heartbeats of settled clients whose
        answer enters no lane; leave the others' results None. The groups of all ``reports``, created if new (and
        committed), by name."""
        now, binding = utc_now(), self._binding(caller)
        groups = self.groups.ensure_many({r.group for r in reports}, self.settings.default_gray_switch)
        rows = self.clients.of_clients({(groups[r.group].id, r.client_id) for r in reports})
        live_after = now - timedelta(seconds=self.settings.client_expiry_seconds / 2)
        settled: dict[int, tuple[Client, bool]] = {}  # index -> (its row, reported columns changed)
        taken: set[int] = set()  # ids of those rows (a row reported twice in a batch goes the single way the second)
        for index, report in enumerate(reports):
            row = settled_row(rows.get((groups[report.group].id, report.client_id), []), report.role, binding,
                              live_after)
            if row is not None and row.id not in taken and self._may_report(report, caller):
                settled[index] = (row, apply_report(row, report, now))
                taken.add(row.id)
        used = {groups[reports[index].group].id: groups[reports[index].group] for index in settled}
        contexts = self._contexts(list(used.values()), {t for row, _ in settled.values() for t in row.topics or ()},
                                  producers=any(row.role == "producer" for row, _ in settled.values()))
        for index, (row, _) in settled.items():
            group = used[row.group_id]
            answer = for_caller(self._answer(group, row, contexts[group.id]), caller)
            if not any(self._lanes_to_enter(group, row, answer.desired_lane, contexts[group.id])):
                results[index] = answer, row.id
        stored = [settled[index] for index in settled if results[index] is not None]
        self.clients.touch([row.id for row, changed in stored if not changed], now)
        self.clients.store([row for row, changed in stored if changed])
        self.session.commit()
        return groups

    def alive(self, entries: Sequence[ClientAlive], caller: Caller) -> list[ApiError | None]:
        """Refresh ``last_seen`` (and store ``health`` when given) of clients whose reports did not change since
        their last full heartbeat, in a constant number of statements and computing no answer: None for each one
        refreshed, 404 for one unknown, not live (the test of ``heartbeat_batch.settled_row``: seen well inside the
        expiry) or another principal's, which then sends its full heartbeat. Changes reach the clients by their
        watches; a full heartbeat goes out periodically all the same."""
        if not entries:
            return []
        now = utc_now()
        groups = self.groups.get_many(entry.group for entry in entries)
        keys = [(groups[e.group].id, e.client_id, e.role) if e.group in groups else None for e in entries]
        live_after = now - timedelta(seconds=self.settings.client_expiry_seconds / 2)
        refreshed = self.clients.refresh_alive([key for key in keys if key is not None], now, live_after,
                                               self._binding(caller))
        self.clients.store_health({refreshed[key]: entry.health.model_dump()
                                   for key, entry in zip(keys, entries, strict=True)
                                   if key in refreshed and entry.health is not None})
        self.session.commit()
        return [None if key in refreshed else NotFound(
            f"{entry.role} {entry.client_id} of group {entry.group} is not live as the caller's: send its full "
            "heartbeat") for key, entry in zip(keys, entries, strict=True)]

    def alive_ids(self, ids: Sequence[int], caller: Caller) -> list[int]:
        """``alive`` by the row ids full heartbeats gave (``stored``), in one statement: the ids not refreshed, in
        the request's order. Only rows the caller may beat are (with ``enforce``, its own): the group rights
        checked when the row was stored hold until its next full heartbeat checks them again."""
        if not ids:
            return []
        now = utc_now()
        live_after = now - timedelta(seconds=self.settings.client_expiry_seconds / 2)
        refreshed = self.clients.refresh_alive_ids(ids, now, live_after, self._binding(caller))
        self.session.commit()
        return [row_id for row_id in ids if row_id not in refreshed]

    @staticmethod
    def _may_report(report: ClientHeartbeat, caller: Caller) -> bool:
        """Whether ``heartbeat`` lets the caller send ``report`` (else it goes that way, to be refused there)."""
        try:
            if report.role == "producer":
                check_gray_producer(caller, report.group, report.gray, report.declared_gray, report.gray_marks)
        except ApiError:
            return False
        return True

    def _enter_lane(self, group: Group, client: Client, lane: str | None, context: AnswerContext) -> bool:
        """A client whose desired lane is ``lane`` takes the lane's slot on each of its topics with gray queues (409
        when a topic has none free, before taking any), and its group takes part in the lanes it is desired or
        reported in; whether anything changed (the answer is then read again)."""
        topics, joining = self._lanes_to_enter(group, client, lane, context)
        taken = bool(topics) and lane is not None and self.lanes.take_on(topics, lane, client.client_id, group.name)
        joined = bool(joining) and self.lanes.record_joined(group, joining)
        return taken or joined

    @staticmethod
    def _lanes_to_enter(group: Group, client: Client, lane: str | None, context: AnswerContext
                        ) -> tuple[list[Topic], set[str]]:
        """What a client desired in ``lane`` enters: the topics of its own with gray queues where the lane holds no
        slot yet, and the lanes (desired or reported in) its group does not take part in yet (none while the
        group's switch is off)."""
        topics = [] if lane is None else [
            t for t in context.topics if t.name in (client.topics or ()) and t.gray_queue_nums
            and lane not in context.slots.get(t.name, {})]
        joining = {lane, lane_of(client.gray, client.lane)} - {None}
        joining = {str(name) for name in joining if name not in context.lanes or not context.lanes[name].taking_part}
        return topics, joining if group.gray_switch else set()

    def view(self, watch: ClientWatch, caller: Caller) -> ClientHeartbeatResponse:
        """What a heartbeat of this client would answer now, without recording one (403 as a heartbeat; 404 for an
        unknown group or client)."""
        [view] = self.views([watch], caller)
        if isinstance(view, ApiError):
            raise view
        return view

    def views(self, watches: Sequence[ClientWatch], caller: Caller) -> list[ClientHeartbeatResponse | ApiError]:
        """``view`` of each watch (its answer, or the error it would raise), in their order: in as many statements
        as one, the clients' rows read together and the answers' group-level parts once."""
        groups = self.groups.get_many(watch.group for watch in watches)
        rows = self.clients.of_clients((groups[w.group].id, w.client_id) for w in watches if w.group in groups)
        clients = {(row.group_id, row.client_id, row.role): row for found in rows.values() for row in found}
        contexts = self._contexts(list(groups.values()), {t for row in clients.values() for t in row.topics or ()},
                                  producers=any(row.role == "producer" for row in clients.values()))
        binding, views = self._binding(caller), []
        for watch in watches:
            group = groups.get(watch.group)
            client = None if group is None else clients.get((group.id, watch.client_id, watch.role))
            if group is None:
                views.append(NotFound(f"group {watch.group} is unknown"))
            elif client is None:
                views.append(NotFound(f"{watch.role} {watch.client_id} is unknown in group {group.name}: "
                                      "heartbeat first"))
            elif not binding.allows(client):
                views.append(self._taken(caller, group.name, client))
            else:
                views.append(for_caller(self._answer(group, client, contexts[group.id]), caller))
        return views

    def group_views(self, group_name: str) -> GroupViews:
        """What a heartbeat of each live client of the group would answer, in four statements whatever the group's
        size: a change of a group wakes all its watches at once, and they share this one read."""
        group = self._group(group_name)
        clients = self.clients.live(group.id, self._seen_after())
        names = {name for client in clients for name in client.topics or ()}
        context = self._context(group, names, producers=True)
        return GroupViews(group.name, self._binding,
                          {(c.client_id, c.role): (c, self._answer(group, c, context)) for c in clients})

    def _context(self, group: Group, topic_names: Sequence[str] | set[str], producers: bool) -> AnswerContext:
        """What answers of ``group``'s clients using ``topic_names`` need (``producers``: read the frozen producer
        groups too)."""
        return self._contexts([group], topic_names, producers)[group.id]

    def _contexts(self, groups: Sequence[Group], topic_names: Sequence[str] | set[str], producers: bool
                  ) -> dict[int, AnswerContext]:
        """``_context`` of each of ``groups`` (by id), sharing ``topic_names``, in as many statements as one."""
        if not groups:
            return {}
        rules = self.rules.applying_to_groups(group.id for group in groups)
        slots = self.lanes.slot_maps()
        topics = self.topics.by_names(topic_names) if topic_names else []
        frozen = self._frozen_producer_groups() if producers else {}
        lanes = self.lanes.states_of(groups, rules, slots)
        return {group.id: AnswerContext(rules=rules[group.id], topics=topics, frozen=frozen, slots=slots,
                                        lanes=lanes[group.id]) for group in groups}

    def _frozen_producer_groups(self) -> dict[str, set[str]]:
        """The producer groups a RUNNING promote or rollback covers (a rollout's too, once past its weight steps),
        each with the lanes of those operations: their producers honour no mark of those lanes."""
        running = self.session.scalars(select(CutoverOperation).where(
            CutoverOperation.state == RUNNING, CutoverOperation.kind.in_(("promote", "rollback", "rollout")))).all()
        frozen: dict[str, set[str]] = {}
        for operation in running:
            if operation.kind == "rollout" and operation.step not in PAST_WEIGHT_STEPS:
                continue
            for name in operation.producer_groups or ():
                frozen.setdefault(name, set()).add(operation.lane)
        return frozen

    def _answer(self, group: Group, client: Client, context: AnswerContext) -> ClientHeartbeatResponse:
        """Marks are honoured only while the switch is on and the client has no explicit normal flag (set by an
        operation or an operator): ``lane_marks``; those of a lane whose RUNNING promote or rollback covers the
        producer group are not (``frozen_lanes``); ``gray_marks``, for clients from before lanes, is false while any
        does. A topic's ``queue_nums`` is a broker's total, lane slots included (docs/lanes.md)."""
        wanted = set(client.topics or ())
        topics = [t for t in context.topics if t.name in wanted]
        lane = client_desired_lane(client, group, context.rules)
        marks = group.gray_switch and client.explicit_gray is not False
        return ClientHeartbeatResponse(
            group=group.name,
            client_id=client.client_id,
            role=client.role,  # type: ignore[arg-type]
            gray_switch=group.gray_switch,
            desired_gray=lane is not None,
            explicit_gray=client.explicit_gray,
            gray=client.gray,
            state=client.state,  # type: ignore[arg-type]
            orphan_policy=group.orphan_policy,  # type: ignore[arg-type]
            gray_weight=group.gray_weight,
            gray_retired=group.gray_retired,
            gray_marks=marks and group.name not in context.frozen,
            lane_marks=marks,
            frozen_lanes=sorted(context.frozen.get(group.name, ())),
            fifo=group.fifo,
            max_attempts=group.max_attempts,
            topics={
                t.name: QueueCounts(queue_nums=total_queue_nums(t.queue_nums, t.gray_queue_nums, t.lane_slots),
                                    gray_queue_nums=t.gray_queue_nums, lane_slots=t.lane_slots,
                                    lanes=context.slots.get(t.name, {}))
                for t in topics
            },
            desired_lane=lane,
            lanes=context.lanes,
        )

    def _group(self, name: str, *, lock: bool = False) -> Group:
        group = self.groups.get(name, lock=lock)
        if group is None:
            raise NotFound(f"group {name} is unknown")
        return group

    def group_clients(self, group_name: str, role: str | None = None, *, limit: int | None = None,
                      offset: int = 0) -> GroupClients:
        """The group's live clients with their desired flags — every one, or the page of ``limit`` from ``offset``
        (by client id and role) — and their counts per role and side over the whole group, in four statements
        whatever its size: a page reads its rows only.

        A client silent for ``client_stale_seconds`` is listed with ``stale`` set: presumed gone
        (killed, partitioned) well before it expires after ``client_expiry_seconds``.
        """
        group = self._group(group_name)
        rules = self.rules.applying_to(group.id)
        seen_after = self._seen_after()
        stale_before = utc_now() - timedelta(seconds=self.settings.client_stale_seconds)
        clients = self.clients.live(group.id, seen_after, role, limit=limit, offset=offset)
        counts = self._counts(group.id, seen_after, stale_before, role)
        total = sum(c.clients for c in counts)
        following = offset + len(clients)
        return GroupClients(
            group=group.name,
            gray_switch=group.gray_switch,
            orphan_policy=group.orphan_policy,  # type: ignore[arg-type]
            gray_weight=group.gray_weight,
            gray_retired=group.gray_retired,
            clients=[client_view(c, group, rules).model_copy(update={"stale": c.last_seen <= stale_before})
                     for c in clients],
            total=total,
            counts=counts,
            offset=offset,
            next_offset=following if limit is not None and following < total else None,
        )

    def _counts(self, group_id: int, seen_after: datetime, stale_before: datetime,
                role: str | None) -> list[ClientCount]:
        """Live clients per role and reported lane (``gray`` for a gray flag naming none), by role then lane."""
        tally: dict[tuple[str, str | None], tuple[int, int]] = {}
        for row_role, gray, lane, count, stale in self.clients.live_tally(group_id, seen_after, stale_before, role):
            key = (row_role, lane_of(gray, lane))
            before = tally.get(key, (0, 0))
            tally[key] = (before[0] + count, before[1] + stale)
        return [ClientCount(role=r, lane=lane, clients=count, stale=stale)  # type: ignore[arg-type]
                for (r, lane), (count, stale) in sorted(tally.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]

    def unregister(self, group_name: str, client_id: str, role: str | None, caller: Caller) -> None:
        """A client stopping cleanly leaves its group at once (one role, or every role of the client id).

        Idempotent: an unknown group or client, or one already gone, changes nothing. The row stays
        (unregistered), so an explicit flag given to the client id still applies when it comes back;
        being expired, any principal may claim it again. 403, changing nothing, when one of the rows is
        a live client another principal registered (``ClientBinding``); admins unregister any client.
        Audited with the client as actor; the group's watchers wake.
        """
        group = self.groups.get(group_name)
        if group is None:
            return
        binding = self._binding(caller)
        for row in self.clients.of_client(group.id, client_id, lock=True):
            if (role is None or row.role == role) and not binding.allows(row):
                raise self._taken(caller, group.name, row)
        rows = self.clients.unregister(group.id, client_id, role)
        if not rows:
            return
        mark_changed(self.session, group.name)
        self.audit.record(
            actor=client_id,
            object_type="client",
            object_id=client_id,
            action="unregister",
            group=group.name,
            before={row.role: {"gray": row.gray, "state": row.state, "queues": row.queues} for row in rows},
            reason="client stopped",
        )
        self.session.commit()
        log.info("client %s (%s) left group %s", client_id, ", ".join(row.role for row in rows), group.name)

    def set_flag(
        self, group_name: str, client_id: str, body: FlagPut, actor: str, operation_id: str | None
    ) -> FlagResult:
        """Set the explicit grayFlag of every role of a client id (``None``: follow the rules).

        Flips on one group are serialized by locking the group row. While a cutover runs on the
        group only that operation may flip (it names itself in ``X-Graymq-Operation``).
        """
        group = self._group(group_name, lock=True)
        operations = self.cutovers.all_running(group.id)
        running = next((op for op in operations if str(op.id) == operation_id), operations[0] if operations else None)
        if operation_id is not None and (running is None or str(running.id) != operation_id):
            raise Conflict(
                f"operation {operation_id} is not running on group {group.name}",
                cutover_view(running) if running is not None else None,
            )
        if running is not None and operation_id is None:
            raise Conflict(
                f"cutover {running.id} ({running.kind}) is running on group {group.name}; "
                "flags change only through it",
                cutover_view(running),
            )
        rows = self.clients.of_client(group.id, client_id)
        if not rows:
            raise NotFound(f"client {client_id} is unknown in group {group.name}")
        before: dict[str, object] = {"explicit_gray": {row.role: row.explicit_gray for row in rows}}
        if body.lane is not None or any(row.explicit_lane for row in rows):
            before["explicit_lane"] = {row.role: lane_of(row.explicit_gray, row.explicit_lane) for row in rows}
        for row in rows:
            row.explicit_gray, row.explicit_lane = body.gray, body.lane
        after: dict[str, object] = {"explicit_gray": {row.role: body.gray for row in rows}}
        lane = lane_of(body.gray, body.lane)
        if "explicit_lane" in before:
            after["explicit_lane"] = {row.role: lane for row in rows}
        if lane is not None:
            self.lanes.record_joined(group, {lane})  # a flag of the group names the lane: it takes part
        if operation_id is not None:
            after["operation_id"] = int(operation_id)
        self.audit.record(
            actor=actor,
            object_type="client",
            object_id=client_id,
            action="set_flag",
            group=group.name,
            before=before,
            after=after,
            reason=body.reason,
        )
        rules = self.rules.applying_to(group.id)
        self.session.commit()
        return FlagResult(
            group=group.name,
            client_id=client_id,
            explicit_gray=body.gray,
            clients=[client_view(row, group, rules) for row in rows],
            explicit_lane=lane,
        )
