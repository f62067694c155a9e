"""The write path every producer of messages shares (sends, send-backs, delayed deliveries): the topic a write may
go to, the append to the store, and what an append wakes (long polls, followers) and counts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import AppendResult, MessageStore, PutMessage
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.protocol.errors import TopicNotExistError


class PutMessageService:
    """Appends to the store; ``on_appended`` (a replicated broker's feed, set by the controller) hears of every
    append, and ``wake(end_offset, topic, queue_id)`` is told of each queue written up to where: it wakes the queue's
    long polls, at once by default, once the in-sync followers stored it on a sync leader (``ReplicaFeed.wake``).

    ``auto_create`` (dev mode): a write to an unknown topic creates it with ``default_layout`` (queues, gray queues).
    """

    def __init__(self, broker_name: str, store: MessageStore, topics: TopicConfigManager, stats: BrokerStats,
                 holds: PullRequestHoldService, *, auto_create: bool = False,
                 default_layout: tuple[int, int] = (8, 2)) -> None:
        self._broker_name = broker_name
        self._store = store
        self._topics = topics
        self._stats = stats
        self.on_appended: Callable[[], None] | None = None
        self.wake: Callable[[int, str, int], None] = lambda end_offset, topic, queue_id: holds.notify(topic, queue_id)
        self._auto_create = auto_create
        self._default_layout = default_layout
        self._lanes: dict[str, tuple[TopicConfig, dict[int, str | None]]] = {}  # topic -> (config, queue -> lane)

    def topic_for_write(self, topic: str) -> TopicConfig:
        """The topic's config if it takes writes (``TopicNotExistError``, ``NoPermissionError`` otherwise)."""
        config = self._topics.get(topic)
        if config is None and self._auto_create:
            config = self._topics.ensure(topic, *self._default_layout)
        if config is None:
            raise TopicNotExistError(f"topic {topic} does not exist on broker {self._broker_name} "
                                     "(unknown to the name server, or not picked up by this broker yet)")
        return config if config.writable else self._topics.require_writable(topic)  # the latter raises

    def append(self, messages: Sequence[PutMessage], one_queue: bool = False) -> list[AppendResult]:
        """Append to the store, count, and wake the long polls of every queue written.

        Counted per queue written, not per message: a batch to one queue (``one_queue``: the caller knows, as for
        a send and a SEND_BATCH) costs one stats update and one wake-up, and no loop over its messages.
        """
        results = self._store.put_messages(messages)
        if self.on_appended is not None:
            self.on_appended()
        put = messages[0]
        if one_queue or len(messages) == 1 or len({(p.topic, p.queue_id) for p in messages}) == 1:
            # a batch's records are contiguous: its bytes are from the first one's start to the last one's end
            size = results[-1].end_offset - results[0].physical_offset
            self._stats.on_put(put.topic, self._lane_of_queue(put.topic, put.queue_id), len(messages), size)
            self.wake(results[-1].end_offset, put.topic, put.queue_id)
            return results
        written: dict[tuple[str, int], list[int]] = {}  # (topic, queue id) -> [messages, bytes, end offset]
        for put, result in zip(messages, results, strict=True):
            key = (put.topic, put.queue_id)
            counts = written.get(key)
            if counts is None:
                written[key] = [1, result.size, result.end_offset]
            else:
                counts[0] += 1
                counts[1] += result.size
                counts[2] = result.end_offset
        for (topic, queue_id), (count, size, end_offset) in written.items():
            self._stats.on_put(topic, self._lane_of_queue(topic, queue_id), count, size)
            self.wake(end_offset, topic, queue_id)
        return results

    def _lane_of_queue(self, topic: str, queue_id: int) -> str | None:
        """The lane of the queue's slot (``TopicConfig.lane_of``: None for a base queue) from the topic's current
        config; its slots' lanes are computed once per config, not per put."""
        config = self._topics.get(topic)
        if config is None:
            return None
        known = self._lanes.get(topic)
        if known is None or known[0] is not config:
            slots = range(config.lane_slots)
            known = self._lanes[topic] = (config, {q: config.lane_of(q) for s in slots for q in config.slot_ids(s)})
        return known[1].get(queue_id)
