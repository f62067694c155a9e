"""Topic configs of this broker: queue counts, gray queue counts, permissions; persisted atomically."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.core.queue_layout import gray_queue_ids
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import (
    BadRequestError,
    GrayMQError,
    NoPermissionError,
    QueueNotExistError,
    TopicNotExistError,
)
from graymq.protocol.names import check_topic_name

PERM_READ = pb.PERM_READ
PERM_WRITE = pb.PERM_WRITE
PERM_READ_WRITE = pb.PERM_READ_WRITE


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic: str
    queue_nums: int
    gray_queue_nums: int = 0
    perm: int = PERM_READ_WRITE
    order: bool = False
    lane_slots: int = 1  # lanes the topic has room for (docs/lanes.md); ``queue_nums`` counts their queues

    def __post_init__(self) -> None:
        problem = check_topic_name(self.topic)
        if problem:
            raise BadRequestError(problem)
        if self.queue_nums < 1 or self.queue_nums > 1024:
            raise BadRequestError(f"topic {self.topic}: queue_nums must be 1..1024, got {self.queue_nums}")
        try:
            gray_queue_ids(self.queue_nums, self.gray_queue_nums)
        except ValueError as exc:
            raise BadRequestError(f"topic {self.topic}: {exc}") from exc
        if self.perm & ~PERM_READ_WRITE or not self.perm:
            raise BadRequestError(f"topic {self.topic}: invalid perm {self.perm}")
        if self.lane_slots < 1:
            raise BadRequestError(f"topic {self.topic}: lane_slots must be >= 1, got {self.lane_slots}")

    @property
    def gray_queues(self) -> tuple[int, ...]:
        return gray_queue_ids(self.queue_nums, self.gray_queue_nums)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def check_queue(self, queue_id: int) -> None:
        if not 0 <= queue_id < self.queue_nums:
            raise QueueNotExistError(f"topic {self.topic} has queues 0..{self.queue_nums - 1}, not {queue_id}")

    def to_pb(self) -> pb.TopicConfig:
        return pb.TopicConfig(topic=self.topic, queue_nums=self.queue_nums, gray_queue_nums=self.gray_queue_nums,
                              perm=self.perm, order=self.order)  # type: ignore[arg-type]

    @classmethod
    def from_pb(cls, msg: pb.TopicConfig) -> TopicConfig:
        return cls(msg.topic, msg.queue_nums, msg.gray_queue_nums, msg.perm or PERM_READ_WRITE, msg.order)


class TopicConfigManager:
    """The broker's topic table, written to ``config/topics.json`` on every change."""

    def __init__(self, config_dir: Path, *, retry_queue_nums: int, retry_gray_queue_nums: int) -> None:
        self._path = config_dir / "topics.json"
        self._topics: dict[str, TopicConfig] = {}
        self._retry_layout = (retry_queue_nums, min(retry_gray_queue_nums, retry_queue_nums))
        self.version = 0

    def load(self) -> None:
        for raw in read_json(self._path, {"topics": []})["topics"]:
            config = TopicConfig(**raw)
            self._topics[config.topic] = config

    def _persist(self) -> None:
        self.version += 1
        topics = sorted(self._topics.values(), key=lambda c: c.topic)
        write_json_atomic(self._path, {"topics": [asdict(c) for c in topics]})

    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def require(self, topic: str) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            raise TopicNotExistError(f"topic {topic} does not exist on this broker")
        return config

    def require_writable(self, topic: str) -> TopicConfig:
        config = self.require(topic)
        if not config.writable:
            raise NoPermissionError(f"topic {topic} is not writable (perm {config.perm})")
        return config

    def all(self) -> list[TopicConfig]:
        return list(self._topics.values())

    def update(self, config: TopicConfig) -> bool:
        """Create or update; returns whether anything changed. Queues are never shrunk below stored data."""
        changed, refused = self.update_all([config])
        if refused:
            raise refused[0][1]
        return bool(changed)

    def update_all(self, configs: Iterable[TopicConfig]) -> tuple[list[TopicConfig], list[tuple[TopicConfig,
                                                                                               GrayMQError]]]:
        """Create or update every config, written to disk once: (the configs that changed anything, the ones
        refused with why — a topic's queues never shrink below stored data)."""
        changed, refused = [], []
        for config in configs:
            current = self._topics.get(config.topic)
            if current == config:
                continue
            if current is not None and config.queue_nums < current.queue_nums:
                refused.append((config, BadRequestError(
                    f"topic {config.topic}: cannot shrink from {current.queue_nums} to {config.queue_nums} queues")))
                continue
            self._topics[config.topic] = config
            changed.append(config)
        if changed:
            self._persist()
        return changed, refused

    def delete(self, topic: str) -> bool:
        """Forget the topic (deleted in the name server); returns whether it was known. Its stored messages are
        the store's to delete (``MessageStore.delete_topic``)."""
        if self._topics.pop(topic, None) is None:
            return False
        self._persist()
        return True

    def ensure_retry_topic(self, topic: str) -> TopicConfig:
        """``%RETRY%<group>`` topics are created on demand with the broker's retry gray layout."""
        config = self._topics.get(topic)
        if config is None:
            queue_nums, gray_nums = self._retry_layout
            config = TopicConfig(topic, queue_nums, gray_nums)
            self.update(config)
        return config

    def ensure(self, topic: str, queue_nums: int, gray_queue_nums: int) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            config = TopicConfig(topic, queue_nums, gray_queue_nums)
            self.update(config)
        return config
