"""The broker's gray isolation check: gray queues to gray clients, weighted normal queues too, adoption."""

from __future__ import annotations

import pytest

from graymq.broker_ext.groups.group_info import ConsumerGroupInfo
from graymq.broker_ext.processors.pull_processor import check_gray_isolation
from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayIsolationError

pytestmark = pytest.mark.unit

TOPIC = TopicConfig("T", 8, 2)  # gray 0 and 7; at weight 50 the gray side also takes 2 4 6


def group(weight: int, gray_clients: bool = True) -> ConsumerGroupInfo:
    info = ConsumerGroupInfo("g", gray_switch=True, gray_weight=weight)
    info.update_client("n1", None, False, [])
    if gray_clients:
        info.update_client("g1", None, True, [])
    return info


def allowed(info: ConsumerGroupInfo, queue_id: int, gray: bool, adopted: bool = False) -> bool:
    request = pb.PullRequest(consumer_group="g", client_id="x", topic="T", queue_id=queue_id, gray_flag=gray,
                             adopted=adopted)
    try:
        check_gray_isolation(TOPIC, info, request)
    except GrayIsolationError:
        return False
    return True


def test_without_weight_each_side_keeps_its_queues() -> None:
    info = group(0)
    assert [q for q in range(8) if allowed(info, q, gray=True)] == [0, 7]
    assert [q for q in range(8) if allowed(info, q, gray=False)] == [1, 2, 3, 4, 5, 6]
    assert allowed(info, 0, gray=False, adopted=True)


def test_the_weighted_normal_queues_belong_to_the_gray_side() -> None:
    info = group(50)
    assert [q for q in range(8) if allowed(info, q, gray=True)] == [0, 2, 4, 6, 7]
    assert [q for q in range(8) if allowed(info, q, gray=False)] == [1, 3, 5]


def test_a_weight_without_a_gray_client_changes_nothing() -> None:
    info = group(50, gray_clients=False)
    assert [q for q in range(8) if allowed(info, q, gray=False)] == [1, 2, 3, 4, 5, 6]
