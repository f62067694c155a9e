"""ORM rows → API views."""

from __future__ import annotations

from collections.abc import Sequence

from graymq.nameserver.gray_policy import desired_lane, lane_of
from graymq.nameserver.models import Client, CutoverOperation, GrayRule, Group, Topic
from graymq.nameserver.schemas import (
    AllGroupsRuleView,
    BrokerTopicConfig,
    ClientView,
    CutoverView,
    GroupView,
    RuleView,
    TopicConfig,
    TopicView,
)


def topic_config(topic: Topic) -> TopicConfig:
    """The topic as configured: ``queue_nums`` is its base count."""
    return TopicConfig(
        topic=topic.name, queue_nums=topic.queue_nums, gray_queue_nums=topic.gray_queue_nums, perm=topic.perm,
        lane_slots=topic.lane_slots,
    )


def total_queue_nums(queue_nums: int, gray_queue_nums: int, lane_slots: int) -> int:
    """A broker's queues of a topic: the base count and each lane slot past the first (docs/lanes.md).

    >>> total_queue_nums(8, 2, 1), total_queue_nums(8, 2, 3)
    (8, 12)
    """
    return queue_nums + (lane_slots - 1) * gray_queue_nums


def broker_topic_config(topic: Topic, lanes: dict[str, int] | None = None) -> BrokerTopicConfig:
    """The topic as brokers get it: ``queue_nums`` is the total a broker holds, lane slots included, and ``lanes``
    which lane holds which slot."""
    return BrokerTopicConfig(**topic_config(topic).model_dump(), lanes=lanes or {}).model_copy(
        update={"queue_nums": total_queue_nums(topic.queue_nums, topic.gray_queue_nums, topic.lane_slots)})


def base_config(reported: TopicConfig) -> TopicConfig:
    """A broker's report of a topic (a total count) as configured (its base count)."""
    slots = reported.lane_slots - 1
    return reported.model_copy(update={"queue_nums": reported.queue_nums - slots * reported.gray_queue_nums})


def topic_view(topic: Topic) -> TopicView:
    return TopicView(
        **topic_config(topic).model_dump(), created_at=topic.created_at, updated_at=topic.updated_at
    )


def group_view(group: Group) -> GroupView:
    return GroupView(
        group=group.name,
        gray_switch=group.gray_switch,
        orphan_policy=group.orphan_policy,  # type: ignore[arg-type]
        gray_weight=group.gray_weight,
        gray_retired=group.gray_retired,
        fifo=group.fifo,
        max_attempts=group.max_attempts,
        created_at=group.created_at,
        updated_at=group.updated_at,
    )


def client_desired_lane(client: Client, group: Group, rules: Sequence[GrayRule]) -> str | None:
    """The lane the client should be in; ``rules``: the group's, then the all-groups rules."""
    return desired_lane(group.gray_switch, client.explicit_gray, client.explicit_lane, rules, client.labels,
                        client.declared_gray, client.declared_lane)


def client_view(client: Client, group: Group, rules: Sequence[GrayRule]) -> ClientView:
    return ClientView(
        client_id=client.client_id,
        role=client.role,  # type: ignore[arg-type]
        labels=client.labels,
        explicit_gray=client.explicit_gray,
        declared_gray=client.declared_gray,
        desired_gray=client_desired_lane(client, group, rules) is not None,
        gray=client.gray,
        state=client.state,  # type: ignore[arg-type]
        queues=client.queues,
        topics=client.topics,
        last_seen=client.last_seen,
        health=client.health,
        gray_marks=client.gray_marks,
        frozen_lanes=client.frozen_lanes,
        principal=client.principal,
        explicit_lane=lane_of(client.explicit_gray, client.explicit_lane),
        declared_lane=lane_of(client.declared_gray, client.declared_lane),
        desired_lane=client_desired_lane(client, group, rules),
        lane=lane_of(client.gray, client.lane),
    )


def rule_view(rule: GrayRule, group: Group) -> RuleView:
    return RuleView(
        id=rule.id,
        group=group.name,
        selector=rule.selector,
        gray=rule.gray,
        position=rule.position,
        created_at=rule.created_at,
        lane=rule.lane if rule.gray else None,
    )


def all_groups_rule_view(rule: GrayRule) -> AllGroupsRuleView:
    return AllGroupsRuleView(id=rule.id, selector=rule.selector, gray=rule.gray, lane=lane_of(rule.gray, rule.lane),
                             position=rule.position, created_at=rule.created_at)


def cutover_view(operation: CutoverOperation) -> CutoverView:
    return CutoverView(
        id=operation.id,
        group=operation.group.name,
        kind=operation.kind,  # type: ignore[arg-type]
        mode=operation.mode,  # type: ignore[arg-type]
        producer_groups=operation.producer_groups,
        state=operation.state,  # type: ignore[arg-type]
        step=operation.step,
        result=operation.result,
        started_by=operation.started_by,
        started_at=operation.started_at,
        updated_at=operation.updated_at,
        finished_at=operation.finished_at,
        lane=operation.lane or "gray",
    )
