"""Messages due at a given time on the schedule service's delay levels, on a real store with a stepped clock: the
level chosen, the hops down the levels, delivery no earlier than due and within the smallest level after, the
pending count a drain reads, and a restart while one waits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graymq.broker_ext.processors.send_back import ScheduleMessageService, level_for
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.broker_ext.store.background import BlockingWork
from graymq.broker_ext.topic_config import TopicConfigManager
from graymq.protocol.constants import PROPERTY_START_DELIVER_TIME, SCHEDULE_TOPIC
from graymq.protocol.record import SYS_FLAG_GRAY, MessageExt, decode_record, make_properties

LEVELS_S = (1, 5, 10, 30)
START_MS = 1_700_000_000_000
STEP_MS = 50  # the service's delivery interval


class Broker:
    """A store, its topics and a schedule service whose store timestamps follow ``now_ms``."""

    def __init__(self, root: Path, now_ms: int) -> None:
        self.now_ms = now_ms
        self.store = MessageStore(StoreConfig(store_dir=root / "store", segment_size=1 << 20, cq_units_per_file=64),
                                  clock_ms=lambda: self.now_ms)
        self.store.load()
        (root / "config").mkdir(exist_ok=True)
        self.topics = TopicConfigManager(root / "config", retry_queue_nums=1, retry_gray_queue_nums=0)
        self.topics.load()
        self.schedule = ScheduleMessageService(self.store, self.topics, self.store.put_messages, BlockingWork(),
                                               LEVELS_S, root / "config")
        self.schedule.load()

    def delivered(self, topic: str, queue_id: int) -> list[MessageExt]:
        result = self.store.get_messages(topic, queue_id, 0, 32)
        return [decode_record(raw) for raw in result.records]

    def run_until(self, end_ms: int, topic: str, queue_id: int) -> int | None:
        """Deliver every ``STEP_MS`` until ``end_ms``; the clock when ``topic``/``queue_id`` first had a message."""
        while self.now_ms <= end_ms:
            self.schedule.deliver_due(self.now_ms)
            if self.delivered(topic, queue_id):
                return self.now_ms
            self.now_ms += STEP_MS
        return None

    def close(self) -> None:
        self.schedule.persist()
        asyncio.run(self.store.stop())


def delayed(body: bytes = b"later", gray: bool = False) -> PutMessage:
    return PutMessage("T", 2, body, make_properties(msg_id="m1", tags="a"), SYS_FLAG_GRAY if gray else 0, START_MS)


@pytest.mark.parametrize(("left_ms", "level"), [
    (1, 1), (999, 1), (1_000, 1), (4_999, 1), (5_000, 2), (29_999, 3), (30_000, 4), (86_400_000, 4),
])
def test_a_message_waits_in_the_largest_level_that_fits_the_time_left(left_ms: int, level: int) -> None:
    assert level_for(LEVELS_S, left_ms) == level


@pytest.mark.parametrize("left_ms", [300, 1_000, 3_500, 7_300, 41_234])
def test_a_message_is_delivered_no_earlier_than_due_and_within_the_smallest_level_after(
        tmp_path: Path, left_ms: int) -> None:
    broker = Broker(tmp_path, START_MS)
    due_ms = START_MS + left_ms
    broker.schedule.schedule_at(delayed(gray=True), due_ms, START_MS)
    assert broker.schedule.pending("T", 2) == 1

    delivered_at = broker.run_until(due_ms + 2_000, "T", 2)

    assert delivered_at is not None
    assert due_ms <= delivered_at <= due_ms + 1_000 + 2 * STEP_MS
    (message,) = broker.delivered("T", 2)
    assert (message.body, message.msg_id, message.tags, message.sys_flag) == (b"later", "m1", "a", SYS_FLAG_GRAY)
    assert PROPERTY_START_DELIVER_TIME not in message.properties
    assert broker.schedule.pending("T", 2) == 0
    broker.close()


def test_a_message_hops_down_the_levels_and_counts_as_pending_until_delivered(tmp_path: Path) -> None:
    broker = Broker(tmp_path, START_MS)
    broker.schedule.schedule_at(delayed(), START_MS + 7_300, START_MS)
    assert broker.store.get_max_offset(SCHEDULE_TOPIC, 1) == 1  # the 5 s level

    broker.now_ms = START_MS + 5_000
    assert broker.schedule.deliver_due(broker.now_ms) == 1  # moved on, to the 1 s level (2.3 s left)

    assert broker.store.get_max_offset(SCHEDULE_TOPIC, 0) == 1
    assert broker.delivered("T", 2) == []
    assert broker.schedule.pending("T", 2) == 1
    broker.close()


def test_a_restart_while_it_waits_still_delivers_it_once_due(tmp_path: Path) -> None:
    broker = Broker(tmp_path, START_MS)
    due_ms = START_MS + 12_000
    broker.schedule.schedule_at(delayed(), due_ms, START_MS)
    broker.run_until(START_MS + 10_500, "T", 2)  # one hop made, from the 10 s level
    broker.close()

    reopened = Broker(tmp_path, START_MS + 10_500)

    assert reopened.schedule.pending("T", 2) == 1
    delivered_at = reopened.run_until(due_ms + 2_000, "T", 2)
    assert delivered_at is not None and due_ms <= delivered_at <= due_ms + 1_000 + 2 * STEP_MS
    assert [m.body for m in reopened.delivered("T", 2)] == [b"later"]
    assert reopened.schedule.pending("T", 2) == 0
    reopened.close()
