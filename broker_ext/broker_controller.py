"""The broker: store, managers, processors and background loops wired together, with one lifecycle."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from graymq.broker_ext.access import AccessControl
from graymq.broker_ext.admin_processor import AdminProcessor
from graymq.broker_ext.client_processor import ClientProcessor
from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.consumer_manager import ConsumerManager
from graymq.broker_ext.lock_processor import LockProcessor
from graymq.broker_ext.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.principals import PrincipalTable
from graymq.broker_ext.producer_table import ProducerTable
from graymq.broker_ext.pull_hold import PullRequestHoldService
from graymq.broker_ext.pull_processor import PullProcessor
from graymq.broker_ext.queue_locks import QueueLocks
from graymq.broker_ext.replica_feed import ReplicaFeed
from graymq.broker_ext.replica_fetcher import ReplicaFetcher
from graymq.broker_ext.replica_role import ReplicaRole
from graymq.broker_ext.retry import ScheduleMessageService, SendBackProcessor
from graymq.broker_ext.send_processor import SendProcessor
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import AppendResult, MessageStore, PutMessage, StoreConfig
from graymq.broker_ext.store.background import BlockingWork
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import TopicNotExistError

log = logging.getLogger(__name__)


class BrokerController:
    """Owns every broker component; ``await start()`` / ``await stop()``."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self.address = ""  # set by the server once bound
        config_dir = settings.store_dir / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.store = MessageStore(StoreConfig(
            store_dir=settings.store_dir, segment_size=settings.segment_size,
            cq_units_per_file=settings.cq_units_per_file, flush=settings.flush,
            flush_interval_ms=settings.flush_interval_ms, retention_hours=settings.retention_hours,
        ))
        self.topics = TopicConfigManager(config_dir, retry_queue_nums=settings.retry_queue_nums,
                                         retry_gray_queue_nums=settings.retry_gray_queue_nums)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.file_work = BlockingWork()  # small config files written (and fsynced) off the event loop
        self.locks = QueueLocks(settings.queue_lease_s)
        self.consumers = ConsumerManager(settings.client_expiry_s, on_client_left=self.locks.release_client)
        self.holds = PullRequestHoldService()
        self.stats = BrokerStats()
        self.schedule = ScheduleMessageService(self, config_dir)
        self.producers = ProducerTable()
        self.send_processor = SendProcessor(self, self.producers)
        self.pull_processor = PullProcessor(self)
        self.client_processor = ClientProcessor(self)
        self.admin_processor = AdminProcessor(self)
        self.send_back_processor = SendBackProcessor(self)
        self.lock_processor = LockProcessor(self.locks, self.topics, self.offsets, self.store,
                                            self.consumers.notify_group)
        self.principals = PrincipalTable(config_dir / "principals.json")
        self.access = AccessControl(self.principals, self.consumers, dev_mode=settings.dev_mode,
                                    topics_from_nameserver=bool(settings.nameserver_urls))
        self.role = ReplicaRole(self.name, settings.replica_id, settings.replication,
                                path=config_dir / "replica_epoch.json" if settings.replication else None)
        self.feed = ReplicaFeed(self)
        self.fetcher = ReplicaFetcher(self)
        self._loops: list[asyncio.Task[None]] = []
        self._gray_queues: dict[str, tuple[TopicConfig, frozenset[int]]] = {}  # topic -> (config, its gray ids)

    def load(self) -> None:
        self.principals.load()
        self.topics.load()
        self.offsets.load()
        self.store.load()
        self.producers.rebuild(self.store)
        self.schedule.load()
        if self.role.replicated:
            self.schedule.pause()  # until the name server says this replica leads

    async def start(self) -> None:
        await self.store.start()
        self.schedule.start()
        loop = asyncio.get_running_loop()
        self._loops.append(loop.create_task(self._housekeeping(), name="broker-housekeeping"))

    async def stop(self) -> None:
        self.holds.wake_all()
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._loops.clear()
        await self.fetcher.close()
        self.feed.reset()
        await self.schedule.stop()
        await self.file_work.drain()  # a background write in flight lands before the final one
        self.schedule.persist()
        self.offsets.persist()
        await self.store.stop()

    async def _housekeeping(self) -> None:
        """Expire silent clients and persist consumer offsets, once a second."""
        while True:
            await asyncio.sleep(1.0)
            self.consumers.scan_expired()
            try:
                await self.offsets.persist_off_loop(self.file_work)
            except OSError:
                log.exception("persisting consumer offsets failed; will retry")

    def delete_topic(self, topic: str) -> bool:
        """Apply a topic's deletion: its consumer offsets, stored consume queues and config go (a topic created
        again starts empty); returns whether the topic was configured here."""
        self.offsets.drop_topic(topic)
        self.locks.drop_topic(topic)
        self.store.delete_topic(topic)
        return self.topics.delete(topic)

    def topic_for_write(self, topic: str) -> TopicConfig:
        config = self.topics.get(topic)
        if config is None and self.settings.auto_create_topic:
            config = self.topics.ensure(topic, self.settings.default_queue_nums, self.settings.default_gray_queue_nums)
        if config is None:
            raise TopicNotExistError(f"topic {topic} does not exist on broker {self.name} "
                                     "(unknown to the name server, or not picked up by this broker yet)")
        return self.topics.require_writable(topic)

    def append(self, messages: Sequence[PutMessage]) -> list[AppendResult]:
        """Append to the store, count, and wake the long polls of every queue written.

        Counted per queue written, not per message: a batch costs one stats update and one wake-up.
        """
        results = self.store.put_messages(messages)
        if self.role.replicated:
            self.feed.appended()
        if len(messages) == 1:  # a plain send
            put = messages[0]
            self.stats.on_put(put.topic, self._is_gray_queue(put.topic, put.queue_id), 1, results[0].size)
            self.holds.notify(put.topic, put.queue_id)
            return results
        written: dict[tuple[str, int], list[int]] = {}  # (topic, queue id) -> [messages, bytes]
        for put, result in zip(messages, results, strict=True):
            key = (put.topic, put.queue_id)
            counts = written.get(key)
            if counts is None:
                written[key] = [1, result.size]
            else:
                counts[0] += 1
                counts[1] += result.size
        for (topic, queue_id), (count, size) in written.items():
            self.stats.on_put(topic, self._is_gray_queue(topic, queue_id), count, size)
            self.holds.notify(topic, queue_id)
        return results

    def _is_gray_queue(self, topic: str, queue_id: int) -> bool:
        """From the topic's current config; its gray ids are computed once per config, not per put."""
        config = self.topics.get(topic)
        if config is None:
            return False
        known = self._gray_queues.get(topic)
        if known is None or known[0] is not config:
            known = self._gray_queues[topic] = (config, frozenset(config.gray_queues))
        return queue_id in known[1]

    def group_backlog(self, group: str, topic: str | None) -> list[pb.QueueBacklog]:
        """Per queue of the group's topics: committed offset, max and min offset, gray or not.

        Delayed retries not yet delivered to a retry queue count in its max offset, so a drain
        does not finish while one is still on its way back.
        """
        topics = [topic] if topic else sorted(self._group_topics(group))
        queues = []
        for name in topics:
            config = self.topics.get(name)
            if config is None:
                continue
            gray_queues = set(config.gray_queues)
            for queue_id in range(config.queue_nums):
                queues.append(pb.QueueBacklog(
                    topic=name, queue_id=queue_id, gray=queue_id in gray_queues,
                    consumer_offset=self.offsets.query(group, name, queue_id),
                    max_offset=self.store.get_max_offset(name, queue_id) + self.schedule.pending[(name, queue_id)],
                    min_offset=self.store.get_min_offset(name, queue_id),
                ))
        return queues

    def _group_topics(self, group: str) -> set[str]:
        topics = set(self.offsets.topics_of(group))
        info = self.consumers.get(group)
        if info is not None:
            topics.update(info.subscription_table)
            topics.update(info.gray_subscription_table)
        return topics
