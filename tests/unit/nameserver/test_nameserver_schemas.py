"""Request bodies: queue layouts follow the gray queue layout rules, names and topics are checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from graymq.nameserver.schemas import BrokerHeartbeat, ClientHeartbeat, QueueLayout, RuleCreate, TopicConfig

pytestmark = pytest.mark.unit


@given(queue_nums=st.integers(-2, 40), gray_queue_nums=st.integers(-2, 40))
def test_a_layout_is_accepted_exactly_when_the_gray_queues_fit(queue_nums: int, gray_queue_nums: int) -> None:
    valid = queue_nums >= 1 and 0 <= gray_queue_nums <= queue_nums
    try:
        QueueLayout(queue_nums=queue_nums, gray_queue_nums=gray_queue_nums)
    except ValidationError:
        assert not valid
    else:
        assert valid


def test_topic_names_follow_the_protocol_rules() -> None:
    assert TopicConfig(topic="%RETRY%group-1", queue_nums=1).topic == "%RETRY%group-1"
    with pytest.raises(ValidationError, match="characters"):
        TopicConfig(topic="a.b", queue_nums=1)


def test_broker_heartbeat_refuses_a_topic_listed_twice() -> None:
    topics = [{"topic": "T", "queue_nums": 4}, {"topic": "T", "queue_nums": 8}]
    with pytest.raises(ValidationError, match="more than once"):
        BrokerHeartbeat(broker_name="b", address="h:1", topics=topics)  # type: ignore[arg-type]


def test_client_heartbeat_defaults_to_a_normal_client_with_no_labels() -> None:
    report = ClientHeartbeat(group="g", client_id="10.0.0.1@42", role="spark")
    assert (report.gray, report.state, report.labels, report.topics, report.queues) == (
        False,
        "NORMAL",
        {},
        [],
        [],
    )


@pytest.mark.parametrize("name", ["", "a/b", "with space", "x" * 256])
def test_group_and_client_names_must_fit_in_a_url_path(name: str) -> None:
    with pytest.raises(ValidationError):
        ClientHeartbeat(group=name, client_id="c", role="consumer")
    with pytest.raises(ValidationError):
        ClientHeartbeat(group="g", client_id=name, role="consumer")


def test_a_rule_needs_at_least_one_label() -> None:
    with pytest.raises(ValidationError):
        RuleCreate(selector={}, gray=True)


def test_a_heartbeat_carries_a_bounded_number_of_labels() -> None:
    ClientHeartbeat(group="g", client_id="c", role="consumer", labels={f"k{i}": "v" for i in range(64)})
    with pytest.raises(ValidationError, match="at most 64"):
        ClientHeartbeat(group="g", client_id="c", role="consumer", labels={f"k{i}": "v" for i in range(65)})
