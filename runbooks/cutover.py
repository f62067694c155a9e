"""Promote and rollback runbooks, recorded as cutover operations in the name server.

Every step is idempotent and its progress lives in the name server, so a controller killed
midway is simply run again: it finds the RUNNING operation of the group and continues.

promote (gray → normal, lossless):
  1. producers: every producer of the release's producer groups gets an explicit normal flag (normal
     for every message: its own flag, ``Message(gray=True)`` and the mark of a message being handled);
     wait until each that is gray or honours gray marks reports gray=false and marks not honoured — no
     new gray message after this (a flipped producer reports gray until its gray sends under way are answered:
     client/producer_flags.py). While the operation is RUNNING the name server tells every producer
     of those groups (one started meanwhile too) not to honour marks, so a normal producer may already
     have stopped honouring them when it is listed: it is flipped all the same, or it would honour them
     again once the operation ends. Progress names each producer waited for and its principal.
  2. consumers: the gray rules of the release go (new pods start normal; producers are checked
     again), then every gray consumer (Spark jobs included) gets an explicit normal flag; each
     drains the gray queues and then reports normal. Progress shows the gray backlog and the
     clients still gray.
  3. verify: no gray client is left and the gray backlog is 0; record timings.

Clients the name server reports stale (no heartbeat for ``GRAYMQ_CLIENT_STALE_SECONDS``) get
the explicit normal flag like the others and are listed in the report's ``stale_clients``. A
stale gray *producer* is still waited for, until it reports normal or the name server forgets it
(``GRAYMQ_CLIENT_EXPIRY_SECONDS``): one cut off from the name server may still reach the brokers
and send gray messages that no consumer would be left to drain. A stale gray *consumer* is not
waited for: one still connected to the brokers keeps its gray queues and drains them, one that is
gone has released them. A clean stop unregisters a client at once.

rollback:
  1. producers as in promote (gray routing stops); gray rules of producer groups other than the
     consumer group go, so new producer pods start normal (the group's own rules stay: its gray
     consumers must stay gray to finish their backlog).
  2. ``drain``: the gray consumers keep consuming until the gray backlog is 0; they can then be
     stopped (they hold only empty gray queues). ``adopt``: the group's orphan policy becomes
     ``adopt``; once the gray consumers are stopped, the normal consumers take the gray queues
     and consume what is left; the policy returns to ``hold`` when the backlog is 0.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from graymq.client.backlog import BacklogUnavailable
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.client import ConflictError, NameServerClient, NotFoundError
from graymq.nameserver_api.records import ClientRecord, CutoverRecord
from graymq.protocol.errors import GrayMQError
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState, CutoverStep
from graymq.runbooks.group_state import CONSUMING_ROLES, GroupInspector, GroupStatus
from graymq.runbooks.hooks import RunbookHooks
from graymq.runbooks.policy import CutoverPolicy
from graymq.runbooks.progress import Progress


class CutoverFailed(GrayMQError):
    """A cutover stopped before finishing; ``report`` says where and what is left."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class CutoverReport:
    operation_id: int | None  # None: nothing to do, so nothing was recorded (``recorded`` False)
    kind: CutoverKind
    mode: CutoverMode
    group: str
    state: CutoverState = CutoverState.RUNNING
    timings_s: dict[str, float] = field(default_factory=dict)
    producers_flipped: list[str] = field(default_factory=list)
    consumers_flipped: list[str] = field(default_factory=list)
    rules_removed: list[dict[str, Any]] = field(default_factory=list)
    gray_consumers_left: list[str] = field(default_factory=list)
    stale_clients: list[str] = field(default_factory=list)  # found stale on the way (producers still waited for)
    gray_backlog: int | None = None
    slots_freed: list[str] = field(default_factory=list)  # topics whose slot the lane gave back
    slots_kept: list[str] = field(default_factory=list)  # topics whose slot it kept, and why
    resumed: bool = False
    message: str = ""
    recorded: bool = True

    # what a resumed operation takes over from the record of the interrupted run
    RESUMED_FIELDS = ("producers_flipped", "consumers_flipped", "rules_removed", "timings_s")

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def changed_nothing(self) -> bool:
        """No producer or consumer flipped and no rule removed: the group had no gray release (a promote of it
        says "nothing to promote")."""
        return not (self.producers_flipped or self.consumers_flipped or self.rules_removed)


class CutoverRunner:
    """Runs promote or rollback (in the policy's mode) of ``lane`` (today's gray side unless another is named) on
    ``group`` as ``policy`` says (the shared defaults when not given). Other lanes run on untouched: only the lane's
    producers, rules, consumers and queues are acted on."""

    report_type: type[CutoverReport] = CutoverReport

    def __init__(self, nameserver: NameServerClient, group: str, policy: CutoverPolicy | None = None,
                 progress: Progress | None = None, hooks: RunbookHooks | None = None, *,
                 lane: str = GRAY_LANE) -> None:
        self.nameserver = nameserver
        self.group = group
        self.lane = lane
        self.policy = policy or CutoverPolicy()
        self.producer_groups = self.policy.producer_groups_of(group)
        self.progress = progress or Progress()
        self.hooks = hooks or RunbookHooks()
        self.inspector = GroupInspector(nameserver)
        self._deadline = 0.0
        self._recorded: tuple[str, dict[str, Any]] | None = None

    async def close(self) -> None:
        await self.inspector.close()

    # -- runbooks ----------------------------------------------------------------------------
    async def promote(self, *, record_nothing: bool = True) -> CutoverReport:
        """Promote the lane. Without ``record_nothing``, a group with nothing in the lane (no client, no rule) and no
        promote to resume gets a report of nothing done (``recorded`` False), no operation started (the CLI; the
        console's click wants its operation recorded)."""
        if not record_nothing and not await self._running() and not await self._has_release():
            return self.report_type(None, CutoverKind.PROMOTE, CutoverMode.DRAIN, self.group,
                                    state=CutoverState.SUCCEEDED, recorded=False)
        report = await self._begin(CutoverKind.PROMOTE, CutoverMode.DRAIN)
        return await self._run(report, self._promote_steps)

    async def _running(self) -> list[CutoverRecord]:
        """The group's RUNNING operations on the lane."""
        return [op for op in await self.nameserver.list_cutovers(self.group, state=CutoverState.RUNNING)
                if op.lane == self.lane]

    async def _has_release(self) -> bool:
        """Whether a promote would act on anything: a producer it flips, a consumer in the lane or a rule of it."""
        for producer_group in self.producer_groups:
            data = await self.inspector.clients(producer_group, role="producer")
            if any(self._flips(c) for c in data.clients):
                return True
        status = await self.inspector.status(self.group, with_backlog=False)
        if any(c.role != "producer" and self.lane in (c.in_lane, c.wanted_lane) for c in status.clients + status.stale):
            return True
        for group in dict.fromkeys([*self.producer_groups, self.group]):
            try:
                rules = await self.nameserver.list_rules(group)
            except NotFoundError:
                continue
            if any(rule.gray and rule.lane == self.lane for rule in rules):
                return True
        return False

    async def rollback(self) -> CutoverReport:
        report = await self._begin(CutoverKind.ROLLBACK, self.policy.mode)
        return await self._run(report, self._rollback_steps)

    async def _promote_steps(self, report: CutoverReport) -> None:
        await self._timed(report, CutoverStep.PRODUCERS, self._stop_gray_producers(report))
        await self._timed(report, CutoverStep.DRAIN, self._flip_consumers(report))
        await self._step(report, CutoverStep.VERIFY)
        status = await self.inspector.status(self.group, lane=self.lane)
        self._note_stale(report, status)
        report.gray_consumers_left = [c.client_id for c in status.gray_clients()]
        report.gray_backlog = status.gray_backlog
        if report.gray_consumers_left or status.gray_backlog:
            raise CutoverFailed("verification failed: gray clients or gray backlog left", report.to_json())
        await self._clear_weight("promote done: the next release starts unweighted")
        await self._give_back_slots(report, status)

    async def _rollback_steps(self, report: CutoverReport) -> None:
        await self._clear_weight("rollback: no more normal traffic to the gray side")
        await self._timed(report, CutoverStep.PRODUCERS, self._stop_gray_producers(report))
        for producer_group in self.producer_groups:
            if producer_group != self.group:  # the group's own rules keep its gray consumers gray
                report.rules_removed += await self._remove_gray_rules(producer_group)
        if report.mode == CutoverMode.ADOPT:
            await self._set_orphan_policy("adopt")
            await self._timed(report, CutoverStep.ADOPT, self._wait(
                report, "waiting for gray consumers to stop; normal consumers adopt the gray queues",
                lambda s: not s.gray_clients() and s.gray_backlog == 0))
            await self._set_orphan_policy("hold")
        else:
            await self._timed(report, CutoverStep.DRAIN, self._wait(
                report, "gray consumers draining the gray backlog", lambda s: s.gray_backlog == 0))
        status = await self.inspector.status(self.group, lane=self.lane)
        self._note_stale(report, status)
        report.gray_consumers_left = [c.client_id for c in status.gray_clients()]
        report.gray_backlog = status.gray_backlog
        await self._give_back_slots(report, status)
        if report.gray_consumers_left:
            report.message = ("gray backlog is 0; these gray consumers hold only empty gray queues and can be "
                              "stopped: " + ", ".join(report.gray_consumers_left))

    # -- the lane ----------------------------------------------------------------------------
    def _may_send(self, client: ClientRecord) -> bool:
        """A producer that is in the lane, or honours messages' marks of the lane, as it last reported (one reporting
        no frozen lanes, from before lanes, honours all or none)."""
        return client.in_lane == self.lane or (bool(client.gray_marks) and self.lane not in (client.frozen_lanes or ()))

    def _flips(self, client: ClientRecord) -> bool:
        """Whether the producer step sets ``client`` normal: one in the lane or headed there; for ``gray`` also every
        other producer not already normal by an explicit flag (marks), but those of other lanes."""
        if self.lane in (client.in_lane, client.wanted_lane):
            return True
        elsewhere = {client.in_lane, client.wanted_lane} - {None, self.lane}
        return self.lane == GRAY_LANE and not elsewhere and (client.explicit_gray is not False
                                                             or self._may_send(client))

    async def _clear_weight(self, why: str) -> None:
        """The lane's weight back to 0 (``gray``: the group's; another lane's only when it has one, so a lane that
        was never weighted leaves no record)."""
        if self.lane == GRAY_LANE:
            await self.nameserver.set_weight(self.group, 0, why)
        elif any(lane.lane == self.lane and lane.weight for lane in await self.nameserver.group_lanes(self.group)):
            await self.nameserver.set_lane_weight(self.group, self.lane, 0, f"lane {self.lane}: {why}")

    async def _set_orphan_policy(self, policy: str) -> None:
        """The group's orphan policy for the lane (``gray``: the group's own; another lane: its override, cleared
        by ``hold``)."""
        if self.lane == GRAY_LANE:
            await self.nameserver.set_orphan_policy(self.group, policy)
        else:
            await self.nameserver.set_lane_orphan_policy(self.group, self.lane, "adopt" if policy == "adopt" else None)

    async def _give_back_slots(self, report: CutoverReport, status: GroupStatus) -> None:
        """The lane gives back its slot of each topic of the group once no group has messages of it left there: it
        waits (within the timeout) for groups that adopted the lane's queues to finish them; the name server refuses
        while a client anywhere is still in the lane on that topic. A slot kept is reported, not a failure."""
        if status.gray_backlog:
            return
        topics = sorted({t for c in status.clients + status.stale if c.role in CONSUMING_ROLES for t in c.topics})
        for topic in topics:
            route = await self.inspector.route(topic)
            if route is None or route.slot_of_lane(self.lane) is None:
                continue
            left = await self._left_elsewhere(topic)
            while left and time.monotonic() < self._deadline:  # groups adopting the lane's queues finish them
                self.progress.update(0, 1, f"lane {self.lane} on {topic}: {left}")
                await asyncio.sleep(self.policy.poll_s)
                left = await self._left_elsewhere(topic)
            if left:
                _add(report.slots_kept, f"{topic}: {left}")
                continue
            try:
                await self.nameserver.free_lane_slot(topic, self.lane, f"{report.kind} #{report.operation_id}")
            except (ConflictError, NotFoundError) as exc:
                _add(report.slots_kept, f"{topic}: {exc.message}")
                continue
            _add(report.slots_freed, topic)
        if report.slots_freed:
            self.progress.note(f"lane {self.lane} gave back its slot of {', '.join(report.slots_freed)}")

    async def _left_elsewhere(self, topic: str) -> str:
        """What other groups consuming ``topic`` have left of the lane there ("" when nothing)."""
        left = []
        for summary in await self.nameserver.list_groups():
            group = summary.settings.group
            if group == self.group:
                continue
            data = await self.inspector.clients(group)
            if any(topic in c.topics for c in data.clients if c.role in CONSUMING_ROLES):
                backlog = await self.inspector.lane_backlog(group, topic, self.lane)
                if backlog:
                    left.append(f"group {group} has {backlog} message(s) of lane {self.lane} left")
        return "; ".join(left)

    # -- steps -------------------------------------------------------------------------------
    async def _stop_gray_producers(self, report: CutoverReport, recheck: bool = False) -> None:
        """Give every producer an explicit normal flag and wait until each reports gray=false with marks not
        honoured.

        Rules are left alone here: a rule shared with the consumer group would flip the gray
        consumers too early. They go in the next step, after which producers are checked again
        (``recheck``: a producer pod started meanwhile may have come up gray by rule); the
        recheck reports progress only when it found such a producer.
        """
        await self._step(report, CutoverStep.PRODUCERS)
        found = False
        for producer_group in self.producer_groups:
            data = await self.inspector.clients(producer_group, role="producer")
            gray = [c.client_id for c in data.clients if self._flips(c)]
            found = found or any(self._may_send(c) or c.wanted_lane == self.lane for c in data.clients)
            await asyncio.gather(*(self._set_normal(report, producer_group, client_id) for client_id in gray))
            for client_id in gray:
                name = f"{producer_group}/{client_id}"
                if name not in report.producers_flipped:
                    report.producers_flipped.append(name)

        async def producers_gray() -> tuple[list[str], list[str]]:
            """The producers that may still send gray (named with their principal, when there is one), and which
            of them are stale (waited for until they report or expire)."""
            left, stale = [], []
            for producer_group in self.producer_groups:
                data = await self.inspector.clients(producer_group, role="producer")
                for c in data.clients:
                    if c.stale:
                        _add(report.stale_clients, f"{producer_group}/{c.client_id}")
                    if self._may_send(c):
                        left.append(c.client_id + (f" (principal {c.principal})" if c.principal else ""))
                        if c.stale:
                            stale.append(c.client_id)
            return left, stale

        while True:
            left, stale = await producers_gray()
            if not left:
                break
            found = True
            self._check_deadline(report, f"producers still gray: {', '.join(left)}"
                                 + (f" (stale, waited for until they report or expire: {', '.join(stale)})"
                                    if stale else ""))
            self.progress.update(0, 1, f"waiting for {len(left)} producer(s) to report normal: {', '.join(left)}"
                                 + (f", {len(stale)} of them stale" if stale else ""))
            await asyncio.sleep(self.policy.poll_s)
        if found or not recheck:
            self.progress.note("producers report normal: no new gray messages")

    async def _remove_rules(self, report: CutoverReport) -> None:
        """Drop the gray rules of the release so new pods start normal, then re-check producers."""
        for group in dict.fromkeys([*self.producer_groups, self.group]):
            report.rules_removed += await self._remove_gray_rules(group)
        await self._stop_gray_producers(report, recheck=True)

    async def _flip_consumers(self, report: CutoverReport) -> None:
        # Gray consumers are listed before the rules go: without its rule a consumer starts
        # draining at once and may already be normal when it is looked at again.
        before = await self.inspector.status(self.group, with_backlog=False)
        await self._remove_rules(report)
        await self._step(report, CutoverStep.DRAIN)
        after = await self.inspector.status(self.group, with_backlog=False)
        gray = [c.client_id for c in before.clients + before.stale + after.clients + after.stale
                if c.role != "producer" and self.lane in (c.in_lane, c.wanted_lane)]
        todo = [client_id for client_id in dict.fromkeys(gray) if client_id not in report.consumers_flipped]
        await asyncio.gather(*(self._set_normal(report, self.group, client_id) for client_id in todo))
        report.consumers_flipped += todo
        await self._wait(report, "gray consumers draining, then flipping to normal",
                         lambda s: not s.gray_clients() and s.gray_backlog == 0)

    async def _wait(self, report: CutoverReport, what: str, done: Callable[[GroupStatus], bool]) -> None:
        initial: int | None = None
        while True:
            try:
                status = await self.inspector.status(self.group, lane=self.lane)
            except BacklogUnavailable as exc:
                self._check_deadline(report, f"{what}: {exc.message}")
                await asyncio.sleep(self.policy.poll_s)
                continue
            backlog = status.gray_backlog
            initial = backlog if initial is None else max(initial, backlog)
            gray = [c.client_id for c in status.gray_clients()]
            report.gray_backlog, report.gray_consumers_left = backlog, gray
            self._note_stale(report, status)
            if done(status):
                self.progress.update(1, 1, f"{what}: done")
                self.progress.note("")
                return
            self.progress.update(initial - backlog, initial, f"gray backlog {backlog}, gray consumers {len(gray)}")
            stale = [c.client_id for c in status.stale if c.role in CONSUMING_ROLES]
            self._check_deadline(report, f"{what}: gray backlog {backlog}, still gray: {', '.join(gray) or 'none'}"
                                 + (f" (stale consumers, not waited for: {', '.join(stale)})" if stale else ""))
            await asyncio.sleep(self.policy.poll_s)

    def _note_stale(self, report: CutoverReport, status: GroupStatus) -> None:
        """List the group's stale consumers (stale producers are listed, as group/client, by the producer step)."""
        for c in status.stale:
            if c.role in CONSUMING_ROLES:
                _add(report.stale_clients, c.client_id)

    async def _remove_gray_rules(self, group: str) -> list[dict[str, Any]]:
        try:
            rules = await self.nameserver.list_rules(group)
        except NotFoundError:
            return []
        removed = []
        for rule in rules:
            if rule.gray and rule.lane == self.lane:
                await self.nameserver.delete_rule(group, rule.id)
                removed.append({"group": group, "selector": rule.selector})
        return removed

    async def _set_normal(self, report: CutoverReport, group: str, client_id: str) -> None:
        operation = report.operation_id if group == self.group else None
        try:
            await self.nameserver.set_flag(group, client_id, False, f"{report.kind} #{report.operation_id}",
                                           operation_id=operation)
        except NotFoundError:
            pass  # the client expired meanwhile: nothing to flip

    # -- bookkeeping -------------------------------------------------------------------------
    async def _begin(self, kind: CutoverKind, mode: CutoverMode) -> CutoverReport:
        running = await self._running()
        if running:
            op = running[0]
            if op.kind != kind or op.mode != mode:
                raise ConflictError(f"a {op.kind} ({op.mode}) operation #{op.id} is running on {self.group}; "
                                    "re-run that command to resume it", op.to_json())
            self.progress.note(f"resuming {kind} #{op.id} of {self.group} at step {op.step!r}")
            report = self.report_type(op.id, kind, mode, self.group, resumed=True)
            previous = op.result or {}
            for key in report.RESUMED_FIELDS:
                if key in previous:
                    setattr(report, key, previous[key])
        else:
            op = await self.nameserver.start_cutover(self.group, kind, mode, self.producer_groups, self.lane)
            self.progress.note(f"{kind} #{op.id} of {self.group} started (producer groups: "
                               f"{', '.join(self.producer_groups)})")
            report = self.report_type(op.id, kind, mode, self.group)
        self.hooks.started(report)
        return report

    async def _run(self, report: Any, steps: Callable[[Any], Awaitable[None]]) -> Any:
        """Run ``steps`` and record how they ended: FAILED (raised ``CutoverFailed``), the final state they set
        (a rollout's rollback ends ABORTED), else SUCCEEDED."""
        self._restart_clock()
        try:
            await steps(report)
        except CutoverFailed as exc:
            report.state, report.message = CutoverState.FAILED, exc.message
            await self.nameserver.update_cutover(report.operation_id, state=report.state, result=report.to_json())
            raise CutoverFailed(exc.message, report.to_json()) from None
        if report.state == CutoverState.RUNNING:
            report.state = CutoverState.SUCCEEDED
        await self.nameserver.update_cutover(report.operation_id, state=report.state, step=CutoverStep.DONE,
                                             result=report.to_json())
        return report

    def _restart_clock(self) -> None:
        """Give what follows the policy's ``timeout_s`` from now."""
        self._deadline = time.monotonic() + self.policy.timeout_s

    async def _step(self, report: CutoverReport, step: CutoverStep | str) -> None:
        """Record the step and the report so far (skipped when both are what was recorded last)."""
        recorded = (step, copy.deepcopy(report.to_json()))
        if recorded != self._recorded:
            await self.nameserver.update_cutover(report.operation_id, step=step, result=recorded[1])
            self._recorded = recorded
            self.hooks.step(report, step)

    async def _timed(self, report: CutoverReport, step: CutoverStep, work: Awaitable[None]) -> None:
        start = time.monotonic()
        await work
        report.timings_s[step.value] = round(time.monotonic() - start, 3)

    def _check_deadline(self, report: CutoverReport, what: str) -> None:
        if time.monotonic() > self._deadline:
            raise CutoverFailed(f"timed out after {self.policy.timeout_s:g}s — {what}", report.to_json())




def _add(names: list[str], name: str) -> None:
    if name not in names:
        names.append(name)
