"""The broker: store, managers, processors and background loops wired together, with one lifecycle.

The controller builds every component and hands each processor only the collaborators it uses (RocketMQ's
processor table is ``remoting_server.py``'s routes); it serves no request itself.
"""

from __future__ import annotations

import asyncio
import logging

from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.processors.admin_processor import AdminProcessor
from graymq.broker_ext.processors.client_processor import ClientProcessor
from graymq.broker_ext.processors.lock_processor import LockProcessor
from graymq.broker_ext.processors.producer_table import ProducerTable
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.processors.pull_processor import PullProcessor
from graymq.broker_ext.processors.put_message_service import PutMessageService
from graymq.broker_ext.processors.send_back import ScheduleMessageService, SendBackProcessor
from graymq.broker_ext.processors.send_processor import SendProcessor
from graymq.broker_ext.replication.feed import ReplicaFeed
from graymq.broker_ext.replication.fetcher import ReplicaFetcher
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.replication.state import ReplicaState
from graymq.broker_ext.security.access import AccessControl
from graymq.broker_ext.security.principals import PrincipalTable
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.store.background import BlockingWork
from graymq.broker_ext.topic_config import TopicConfigManager
from graymq.protocol.errors import GrayMQError
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)


class BrokerController:
    """Owns every broker component; ``load()``, ``await start()`` / ``await stop()``."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self.address = ""  # set by the server once bound
        config_dir = settings.store_dir / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.store = MessageStore(settings)  # validated once, as BrokerSettings
        self.topics = TopicConfigManager(config_dir, retry_queue_nums=settings.retry_queue_nums,
                                         retry_gray_queue_nums=settings.retry_gray_queue_nums)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.file_work = BlockingWork()  # small config files written (and fsynced) off the event loop
        self.locks = QueueLocks(settings.queue_lease_s)
        self.consumers = ConsumerManager(settings.client_expiry_s, on_client_left=self.locks.release_client)
        self.holds = PullRequestHoldService()
        self.stats = BrokerStats()
        self.role = ReplicaRole(self.name, settings.replica_id, settings.replication,
                                path=config_dir / "replica_epoch.json" if settings.replication else None)
        self.put_service = PutMessageService(
            self.name, self.store, self.topics, self.stats, self.holds, auto_create=settings.auto_create_topic,
            default_layout=(settings.default_queue_nums, settings.default_gray_queue_nums))
        self.schedule = ScheduleMessageService(self.store, self.topics, self.put_service.append, self.file_work,
                                               settings.delay_levels_s, config_dir)
        replica_state = ReplicaState(self.offsets, self.schedule, self.locks)
        self.feed = ReplicaFeed(settings, self.role, self.store, replica_state, self.holds.notify)
        self.fetcher = ReplicaFetcher(self.name, settings.token, self.role, self.store, replica_state)
        if self.role.replicated:  # set here: the feed carries the schedule's offsets, the schedule appends through it
            self.put_service.on_appended = self.feed.appended
        if self.role.sync:  # consumers read, and long polls wake, up to what the in-sync followers stored
            self.put_service.wake = self.feed.wake
            self.store.readable_end = self.feed.confirmed_offset
        self.producers = ProducerTable()
        self.send_processor = SendProcessor(self.name, self.put_service, self.producers, self.store, self.role,
                                            self.feed, sync_flush=settings.flush == "sync",
                                            limits=settings.property_limits)
        self.pull_processor = PullProcessor(self.topics, self.consumers, self.locks, self.offsets, self.store,
                                            self.holds, self.stats, self.role,
                                            max_long_poll_ms=settings.max_long_poll_ms)
        self.client_processor = ClientProcessor(self.topics, self.consumers, self.locks)
        self.admin_processor = AdminProcessor(self.topics, self.offsets, self.locks, self.store, self.consumers,
                                              self.schedule, self.feed.listed_end)
        self.send_back_processor = SendBackProcessor(self.store, self.topics, self.consumers, self.put_service,
                                                     self.schedule)
        self.lock_processor = LockProcessor(self.locks, self.topics, self.offsets, self.store,
                                            self.consumers.notify_group)
        self.principals = PrincipalTable(config_dir / "principals.json")
        self.access = AccessControl(self.principals, self.consumers, dev_mode=settings.dev_mode,
                                    topics_from_nameserver=bool(settings.nameserver_urls))
        self._supervisor = Supervisor(f"broker {self.name}", self._loop_ended)
        self._loops: list[asyncio.Task[None]] = []

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
        self.schedule.start(self._supervisor)
        self._loops.append(self._supervisor.spawn("broker-housekeeping", self._housekeeping))

    async def stop(self) -> None:
        self.holds.wake_all()
        await self._supervisor.cancel(self._loops)
        self._loops.clear()
        await self.fetcher.close()
        self.feed.reset()
        await self.schedule.stop()
        await self.file_work.drain()  # a background write in flight lands before the final one
        self.schedule.persist()
        self.offsets.persist()
        await self.store.stop()

    def _loop_ended(self, exc: GrayMQError, where: str) -> None:
        log.error("broker %s: %s ended: %s", self.name, where, exc.message)

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
