"""ORM rows → API views."""

from __future__ import annotations

from collections.abc import Sequence

from graymq.nameserver.gray_policy import desired_gray
from graymq.nameserver.models import Client, CutoverOperation, GrayRule, Group, Topic
from graymq.nameserver.schemas import ClientView, CutoverView, GroupView, RuleView, TopicConfig, TopicView


def topic_config(topic: Topic) -> TopicConfig:
    return TopicConfig(
        topic=topic.name, queue_nums=topic.queue_nums, gray_queue_nums=topic.gray_queue_nums, perm=topic.perm
    )


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


def client_desired_gray(client: Client, group: Group, rules: Sequence[GrayRule]) -> bool:
    return desired_gray(group.gray_switch, client.explicit_gray, rules, client.labels, client.declared_gray)


def client_view(client: Client, group: Group, rules: Sequence[GrayRule]) -> ClientView:
    return ClientView(
        client_id=client.client_id,
        role=client.role,  # type: ignore[arg-type]
        labels=client.labels,
        explicit_gray=client.explicit_gray,
        declared_gray=client.declared_gray,
        desired_gray=client_desired_gray(client, group, rules),
        gray=client.gray,
        state=client.state,  # type: ignore[arg-type]
        queues=client.queues,
        topics=client.topics,
        last_seen=client.last_seen,
        health=client.health,
        gray_marks=client.gray_marks,
        principal=client.principal,
    )


def rule_view(rule: GrayRule, group: Group) -> RuleView:
    return RuleView(
        id=rule.id,
        group=group.name,
        selector=rule.selector,
        gray=rule.gray,
        position=rule.position,
        created_at=rule.created_at,
    )


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
    )
