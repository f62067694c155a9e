"""What an append counts: per queue written (by topic and the lane of its slot), messages and record bytes, for a
send, a batch to one queue and a batch across queues alike (a real store in a temporary directory)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.processors.put_message_service import PutMessageService
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.broker_ext.topic_config import TopicConfigManager

pytestmark = pytest.mark.unit


def _put(queue_id: int, body: bytes, topic: str = "T") -> PutMessage:
    return PutMessage(topic, queue_id, body, {"UNIQ_KEY": f"ID{queue_id}{len(body)}"})


@pytest.mark.parametrize("batches", [
    [[_put(0, b"x")]],
    [[_put(1, b"a" * n) for n in range(1, 40)]],
    [[_put(n % 3, b"b" * n) for n in range(1, 30)], [_put(2, b"c")]],
    [[_put(0, b"d", "T"), _put(0, b"e", "U"), _put(0, b"f", "T")]],
])
def test_messages_and_bytes_are_counted_per_topic_as_stored(tmp_path: Path, batches: list[list[PutMessage]]) -> None:
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", segment_size=1 << 20))
    store.load()
    topics = TopicConfigManager(tmp_path, retry_queue_nums=1, retry_gray_queue_nums=0)
    gray = set(topics.ensure("T", 4, 1).gray_queues)
    topics.ensure("U", 4, 0)
    stats = BrokerStats()
    service = PutMessageService("b", store, topics, stats, PullRequestHoldService())
    stored: dict[tuple[str, str | None], list[int]] = {}  # (topic, lane) -> [messages, bytes]
    for batch in batches:
        for put, result in zip(batch, service.append(batch), strict=True):
            lane = "gray" if put.topic == "T" and put.queue_id in gray else None  # no lane map heard: slot 0 is gray's
            counts = stored.setdefault((put.topic, lane), [0, 0])
            counts[0] += 1
            counts[1] += result.size
    assert {key: stats.put_msgs[key] for key in stored} == {key: c[0] for key, c in stored.items()}
    assert {key: stats.put_bytes[key] for key in stored} == {key: c[1] for key, c in stored.items()}
    assert sum(stats.put_msgs.values()) == sum(len(batch) for batch in batches)
    assert sum(stats.put_bytes.values()) == store.commitlog.max_offset
    asyncio.run(store.stop())
