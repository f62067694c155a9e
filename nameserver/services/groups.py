"""Group settings: gray switch, orphan policy, weight and gray rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from pydantic import BaseModel
from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import Conflict, NotFound
from graymq.nameserver.models import GrayRule, Group
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.clients import ClientRepository
from graymq.nameserver.repositories.cutovers import CutoverRepository
from graymq.nameserver.repositories.deletions import DeletionRepository
from graymq.nameserver.repositories.groups import GroupRepository
from graymq.nameserver.repositories.lanes import LaneRepository
from graymq.nameserver.repositories.rules import RuleRepository
from graymq.nameserver.schemas import (
    AllGroupsRuleView,
    ConsumptionPut,
    GroupDetail,
    GroupSummary,
    GroupView,
    OrphanPolicyPut,
    RetiredPut,
    RuleCreate,
    RuleView,
    SwitchPut,
    WeightPut,
)
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.lanes import GRAY_LANE, check_weights
from graymq.nameserver.services.topics import TopicService
from graymq.nameserver.services.views import all_groups_rule_view, cutover_view, group_view, rule_view
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import EVERY_GROUP, mark_changed
from graymq.protocol.constants import dlq_topic, retry_topic


class GroupService:
    """Reads need the group to exist; changes create it (operators may prepare a group before its clients)."""

    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.groups = GroupRepository(session)
        self.rules = RuleRepository(session)
        self.cutovers = CutoverRepository(session)
        self.audit = AuditService(session)

    def _existing(self, name: str, *, lock: bool = False) -> Group:
        group = self.groups.get(name, lock=lock)
        if group is None:
            raise NotFound(f"group {name} is unknown")
        return group

    def _for_change(self, name: str) -> Group:
        return self.groups.ensure(name, self.settings.default_gray_switch, lock=True)

    def all(self) -> list[GroupSummary]:
        """Every group with how many live clients (all roles) it has."""
        live: Counter[str] = Counter()
        for name, _role, _gray, _lane, count in ClientRepository(self.session).live_counts(self._seen_after()):
            live[name] += count
        return [GroupSummary(**group_view(g).model_dump(), live_clients=live[g.name]) for g in self.groups.all()]

    def _seen_after(self) -> datetime:
        return utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)

    def delete(self, name: str, actor: str, reason: str | None) -> None:
        """Delete a group with no live client and no running cutover (409 otherwise), with its rules, cutover
        records, client rows and its retry and dead-letter topics; brokers drop its offsets and those topics at
        their next registration. Audited."""
        BrokerRepository(self.session).lock_all()
        group = self._existing(name, lock=True)
        running = self.cutovers.running(group.id)
        if running is not None:
            raise Conflict(
                f"cutover {running.id} ({running.kind}) is running on group {group.name}; "
                "it must finish before the group can be deleted",
                cutover_view(running),
            )
        clients = ClientRepository(self.session).live(group.id, self._seen_after())
        if clients:
            listed = ", ".join(f"{c.client_id} ({c.role})" for c in clients)
            expiry = self.settings.client_expiry_seconds
            raise Conflict(
                f"group {group.name} has {len(clients)} live client(s): {listed}; stop them first "
                f"(a client stopped without a clean exit is forgotten {expiry} s after its last heartbeat)",
                {"group": group.name, "clients": [{"client_id": c.client_id, "role": c.role} for c in clients],
                 "client_expiry_seconds": expiry},
            )
        before = {
            **group_view(group).model_dump(),
            "rules": [rule_view(r, group).model_dump() for r in self.rules.of_group(group.id)],
        }
        topics = [retry_topic(group.name), dlq_topic(group.name)]
        TopicService(self.session, self.settings).delete_unchecked(topics)
        DeletionRepository(self.session).add("group", group.name, utc_now())
        self.groups.delete(group)
        self.audit.record(
            actor=actor,
            object_type="group",
            object_id=group.name,
            action="delete",
            group=group.name,
            before=before,
            after={"topics_deleted": topics},
            reason=reason,
        )
        self.session.commit()

    def detail(self, name: str) -> GroupDetail:
        group = self._existing(name)
        running = self.cutovers.running(group.id)
        return GroupDetail(
            **group_view(group).model_dump(),
            rules=[rule_view(r, group) for r in self.rules.of_group(group.id)],
            running_cutover=cutover_view(running) if running is not None else None,
        )

    def set_switch(self, name: str, body: SwitchPut, actor: str) -> GroupView:
        return self._set_setting(name, "gray_switch", body.enabled, "set_switch", body.reason, actor)

    def set_orphan_policy(self, name: str, body: OrphanPolicyPut, actor: str) -> GroupView:
        return self._set_setting(name, "orphan_policy", body.policy, "set_orphan_policy", body.reason, actor)

    def set_weight(self, name: str, body: WeightPut, actor: str) -> GroupView:
        """The percent of each topic's normal queues the group's gray consumers take (0: none); 409 when the
        weights of the group's lanes would add up to more than 100 %."""
        group = self._for_change(name)
        check_weights(group, LaneRepository(self.session).of_group(group.id), GRAY_LANE, body.weight)
        return self._set_setting(name, "gray_weight", body.weight, "set_weight", body.reason, actor)

    def set_consumption(self, name: str, body: ConsumptionPut, actor: str) -> GroupView:
        """How stock pop consumers of the group consume: FIFO and the deliveries before the dead-letter queue."""
        view = group_view(self._existing(name)) if body.fifo is None and body.max_attempts is None else None
        if body.fifo is not None:
            view = self._set_setting(name, "fifo", body.fifo, "set_fifo", body.reason, actor)
        if body.max_attempts is not None:
            view = self._set_setting(name, "max_attempts", body.max_attempts, "set_max_attempts", body.reason, actor)
        assert view is not None
        return view

    def set_retired(self, name: str, body: RetiredPut, actor: str) -> GroupView:
        """Retire the group's gray side (its consumers hold nothing; normal consumers adopt) or bring it back."""
        return self._set_setting(name, "gray_retired", body.retired, "set_retired", body.reason, actor)

    def _set_setting(
        self, name: str, column: str, value: object, action: str, reason: str | None, actor: str
    ) -> GroupView:
        """Change one setting of a group (created if new), audited with before and after; the group's clients
        act on every setting, so its watchers wake once the change commits."""
        group = self._for_change(name)
        before = getattr(group, column)
        setattr(group, column, value)
        group.updated_at = utc_now()
        mark_changed(self.session, group.name)
        self.audit.record(
            actor=actor,
            object_type="group",
            object_id=group.name,
            action=action,
            group=group.name,
            before={column: before},
            after={column: value},
            reason=reason,
        )
        self.session.commit()
        return group_view(group)

    def rules_of(self, name: str) -> list[RuleView]:
        group = self._existing(name)
        return [rule_view(r, group) for r in self.rules.of_group(group.id)]

    def put_rule(self, name: str, body: RuleCreate, actor: str) -> tuple[RuleView, bool]:
        """Add a rule at the end of the group's list, or change the rule with the same selector in place
        (so ``gray rule G --label k=v off`` after ``on`` takes effect); returns it and whether it is new."""
        group = self._for_change(name)
        rule, before = self._put_rule(group.id, body, lambda r: rule_view(r, group))
        after = rule_view(rule, group)
        self._audit_rule(actor, rule.id, before, after.model_dump(), group.name, body.reason)
        self.session.commit()
        return after, before is None

    def all_groups_rules(self) -> list[AllGroupsRuleView]:
        return [all_groups_rule_view(r) for r in self.rules.of_group(None)]

    def put_all_groups_rule(self, body: RuleCreate, actor: str) -> tuple[AllGroupsRuleView, bool]:
        """``put_rule`` for the rules of every group (they apply after each group's own); every group's watchers
        wake."""
        rule, before = self._put_rule(None, body, all_groups_rule_view)
        after = all_groups_rule_view(rule)
        mark_changed(self.session, EVERY_GROUP)
        self._audit_rule(actor, rule.id, before, after.model_dump(), None, body.reason)
        self.session.commit()
        return after, before is None

    def _put_rule(self, group_id: int | None, body: RuleCreate,
                  view: Callable[[GrayRule], BaseModel]) -> tuple[GrayRule, dict[str, object] | None]:
        """The rule of ``group_id`` (``None``: of every group) with the body's selector, added or changed; and its
        ``view`` before (``None``: added)."""
        existing = next((r for r in self.rules.of_group(group_id) if r.selector == body.selector), None)
        if existing is None:
            rule = self.rules.add(GrayRule(group_id=group_id, selector=body.selector, gray=body.gray, lane=body.lane,
                                           position=self.rules.next_position(group_id), created_at=utc_now()))
            return rule, None
        before = view(existing).model_dump()
        existing.gray, existing.lane = body.gray, body.lane
        self.session.flush()
        return existing, before

    def _audit_rule(self, actor: str, rule_id: int, before: dict[str, object] | None, after: dict[str, object],
                    group: str | None, reason: str | None) -> None:
        self.audit.record(actor=actor, object_type="rule", object_id=rule_id,
                          action="create" if before is None else "update", group=group, before=before, after=after,
                          reason=reason)

    def delete_all_groups_rule(self, rule_id: int, actor: str, reason: str | None) -> None:
        rule = self.rules.get(None, rule_id)
        if rule is None:
            raise NotFound(f"all-groups rule {rule_id} is unknown")
        before = all_groups_rule_view(rule).model_dump()
        self.rules.delete(rule)
        mark_changed(self.session, EVERY_GROUP)
        self.audit.record(actor=actor, object_type="rule", object_id=rule_id, action="delete", before=before,
                          reason=reason)
        self.session.commit()

    def delete_rule(self, name: str, rule_id: int, actor: str, reason: str | None) -> None:
        group = self._existing(name, lock=True)
        rule = self.rules.get(group.id, rule_id)
        if rule is None:
            raise NotFound(f"rule {rule_id} is unknown in group {group.name}")
        before = rule_view(rule, group).model_dump()
        self.rules.delete(rule)
        self.audit.record(
            actor=actor,
            object_type="rule",
            object_id=rule_id,
            action="delete",
            group=group.name,
            before=before,
            reason=reason,
        )
        self.session.commit()
