"""A stock producer's delivery time as the gRPC endpoint reads it: ms since the epoch from the Timestamp, also when
the Python SDK put its milliseconds in the seconds; the times RocketMQ refuses refused."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from graymq.broker_ext.grpc_endpoint.send import MAX_DELAY_MS, check_delivery_time, delivery_ms
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2


def delayed(seconds: int, nanos: int = 0, **fields: object) -> v2.SystemProperties:
    props = v2.SystemProperties(message_type=v2.DELAY, **fields)  # type: ignore[arg-type]
    props.delivery_timestamp.seconds = seconds
    props.delivery_timestamp.nanos = nanos
    return props


def test_a_timestamp_is_read_in_ms_and_ms_in_its_seconds_as_ms() -> None:
    assert delivery_ms(delayed(1_800_000_000, 250_000_000)) == 1_800_000_000_250
    assert delivery_ms(delayed(1_800_000_000_250)) == 1_800_000_000_250  # rocketmq-python-client 5.1


def test_times_within_the_maximum_delay_pass_including_past_ones() -> None:
    now_s = int(time.time())
    for seconds in (now_s - 60, now_s + 5, now_s + MAX_DELAY_MS // 1000 - 60, (now_s + 5) * 1000):
        check_delivery_time(delayed(seconds))


@pytest.mark.parametrize(("props", "words"), [  # built when the test runs: collection may be long before
    (lambda: delayed(int(time.time()) + MAX_DELAY_MS // 1000 + 60), "86400 s allowed"),
    (lambda: delayed(int(time.time()) + 5, message_group="order-1"), "FIFO"),
    (lambda: v2.SystemProperties(message_type=v2.DELAY), "needs a delivery_timestamp"),
], ids=["too-far", "fifo", "no-timestamp"])
def test_a_delivery_time_rocketmq_refuses_is_illegal(props: Callable[[], v2.SystemProperties], words: str) -> None:
    with pytest.raises(RocketMQStatusError) as refused:
        check_delivery_time(props())
    assert refused.value.to_status().code == v2.ILLEGAL_DELIVERY_TIME and words in str(refused.value)
