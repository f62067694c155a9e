"""Topic configs of this broker: queue counts, gray queue counts, lane slots, permissions; persisted atomically.

A topic's ``queue_nums`` counts every queue of the broker, its ``lane_slots`` slots of ``gray_queue_nums`` queues
included (``core.queue_layout``: slot 0 is today's gray queues, the others are appended). ``lanes`` is which lane
holds which slot as the name server last said; a config that never heard a lane map (``None``) gives slot 0 to
``gray``, as ``core.route`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.core.queue_layout import (
    GRAY_LANE,
    base_queue_nums,
    gray_queue_ids,
    lane_base_ids,
    slot_of_queue,
    slot_queue_ids,
)
from graymq.core.route import FREE_SLOT
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import (
    BadRequestError,
    GrayMQError,
    NoPermissionError,
    QueueNotExistError,
    TopicNotExistError,
)
from graymq.protocol.names import NAME_RULE, check_topic_name

PERM_READ = pb.PERM_READ
PERM_WRITE = pb.PERM_WRITE
PERM_READ_WRITE = pb.PERM_READ_WRITE

LanePairs = tuple[tuple[str, int], ...]
"""A lane map (lane -> slot) as a config keeps it: (lane, slot) pairs sorted by lane."""


def lane_pairs(lanes: Mapping[str, int] | Iterable[Iterable[Any]] | None) -> LanePairs | None:
    """A lane map (a mapping, or pairs as JSON gives them back) as a config keeps it; None stays None."""
    if lanes is None:
        return None
    items = lanes.items() if isinstance(lanes, Mapping) else (tuple(pair) for pair in lanes)
    return tuple(sorted((str(lane), int(slot)) for lane, slot in items))


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic: str
    queue_nums: int
    gray_queue_nums: int = 0
    perm: int = PERM_READ_WRITE
    order: bool = False
    lane_slots: int = 1
    lanes: LanePairs | None = None  # (lane, slot) pairs; None: no lane map heard (slot 0 is ``gray``'s)

    def __post_init__(self) -> None:
        problem = check_topic_name(self.topic)
        if problem:
            raise BadRequestError(problem)
        if self.queue_nums < 1 or self.queue_nums > 1024:
            raise BadRequestError(f"topic {self.topic}: queue_nums must be 1..1024, got {self.queue_nums}")
        try:
            gray_queue_ids(self.queue_nums, self.gray_queue_nums)
            base_queue_nums(self.queue_nums, self.gray_queue_nums, self.lane_slots)
        except (TypeError, ValueError) as exc:
            raise BadRequestError(f"topic {self.topic}: {exc}") from exc
        if self.perm & ~PERM_READ_WRITE or not self.perm:
            raise BadRequestError(f"topic {self.topic}: invalid perm {self.perm}")
        object.__setattr__(self, "lanes", lane_pairs(self.lanes))
        self._check_lanes()

    def _check_lanes(self) -> None:
        slots: dict[int, str] = {}
        for lane, slot in self.lanes or ():
            if check_topic_name(lane) is not None:
                raise BadRequestError(f"topic {self.topic}: invalid lane name {lane!r} ({NAME_RULE})")
            if not 0 <= slot < self.lane_slots:
                raise BadRequestError(f"topic {self.topic}: lane {lane} holds slot {slot}, outside its "
                                      f"{self.lane_slots} slots")
            if slot in slots:
                raise BadRequestError(f"topic {self.topic}: lanes {slots[slot]} and {lane} both hold slot {slot}")
            slots[slot] = lane

    @property
    def gray_queues(self) -> tuple[int, ...]:
        """Slot 0's queues: today's gray queues."""
        return self.slot_ids(0)

    def slot_ids(self, slot: int) -> tuple[int, ...]:
        """The queue ids of lane slot ``slot``."""
        return slot_queue_ids(self.queue_nums, self.gray_queue_nums, self.lane_slots, slot)

    @property
    def base_ids(self) -> tuple[int, ...]:
        """The base (normal) queue ids: in no lane slot."""
        return lane_base_ids(self.queue_nums, self.gray_queue_nums, self.lane_slots)

    def slot_of(self, queue_id: int) -> int | None:
        """The lane slot ``queue_id`` is in; None for a base queue (or a queue the topic does not have)."""
        if not self.gray_queue_nums:
            return None
        return slot_of_queue(queue_id, self.queue_nums, self.gray_queue_nums, self.lane_slots)

    @property
    def lane_map(self) -> dict[str, int]:
        """Lane -> the slot it holds, as known (no map heard: ``gray`` holds slot 0)."""
        return {GRAY_LANE: 0} if self.lanes is None else dict(self.lanes)

    def lane_of(self, queue_id: int) -> str | None:
        """The lane holding ``queue_id``'s slot: None for a base queue, ``FREE_SLOT`` when no lane is known to."""
        slot = self.slot_of(queue_id)
        return None if slot is None else _slot_lanes(self.lanes).get(slot, FREE_SLOT)

    def slot_of_lane(self, lane: str) -> int | None:
        """The slot ``lane`` holds as known; None when it holds none (or the topic has no lane queues)."""
        return self.lane_map.get(lane) if self.gray_queue_nums else None

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
                              perm=self.perm, order=self.order, lane_slots=self.lane_slots,  # type: ignore[arg-type]
                              lanes=dict(self.lanes or ()))

    @classmethod
    def from_pb(cls, msg: pb.TopicConfig) -> TopicConfig:
        """An empty lane map on the wire is "none known" (protobuf cannot tell an empty map from none)."""
        return cls(msg.topic, msg.queue_nums, msg.gray_queue_nums, msg.perm or PERM_READ_WRITE, msg.order,
                   msg.lane_slots or 1, lane_pairs(dict(msg.lanes) or None))

    def to_json(self) -> dict[str, Any]:
        """As ``topics.json`` keeps it; the lane keys only when they differ from a config without lanes, so a
        topic without them is written as before."""
        raw: dict[str, Any] = {"topic": self.topic, "queue_nums": self.queue_nums,
                               "gray_queue_nums": self.gray_queue_nums, "perm": self.perm, "order": self.order}
        if self.lane_slots != 1:
            raw["lane_slots"] = self.lane_slots
        if self.lanes is not None:
            raw["lanes"] = dict(self.lanes)
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TopicConfig:
        """Read back ``to_json`` (a file written before lanes has no lane keys: one slot, no map)."""
        return cls(str(raw["topic"]), int(raw["queue_nums"]), int(raw.get("gray_queue_nums", 0)),
                   int(raw.get("perm", PERM_READ_WRITE)), bool(raw.get("order", False)),
                   int(raw.get("lane_slots", 1)), lane_pairs(raw.get("lanes")))


class TopicConfigManager:
    """The broker's topic table, written to ``config/topics.json`` on every change."""

    def __init__(self, config_dir: Path, *, retry_queue_nums: int, retry_gray_queue_nums: int) -> None:
        self._path = config_dir / "topics.json"
        self._topics: dict[str, TopicConfig] = {}
        self._retry_layout = (retry_queue_nums, min(retry_gray_queue_nums, retry_queue_nums))
        self.version = 0

    def load(self) -> None:
        for raw in read_json(self._path, {"topics": []})["topics"]:
            config = TopicConfig.from_json(raw)
            self._topics[config.topic] = config

    def _persist(self) -> None:
        self.version += 1
        topics = sorted(self._topics.values(), key=lambda c: c.topic)
        write_json_atomic(self._path, {"topics": [c.to_json() for c in topics]})

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
            if current is not None and config.lanes is None and current.lanes is not None:
                config = replace(config, lanes=current.lanes)  # a config that names no lane map keeps the known one
            if current == config:
                continue
            why = _shrinks(current, config) if current is not None else None
            if why is not None:
                refused.append((config, BadRequestError(f"topic {config.topic}: {why}")))
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

    def ensure_retry_topic(self, topic: str, lane_slots: int = 1) -> TopicConfig:
        """``%RETRY%<group>`` topics are created on demand with the broker's retry gray layout, and at least
        ``lane_slots`` lane slots (a send-back from a topic of K slots grows its retry topic to K: slots are
        appended, so no retry queue changes its role)."""
        config = self._topics.get(topic)
        queue_nums, gray_nums = self._retry_layout
        if config is None:
            config = TopicConfig(topic, queue_nums + (lane_slots - 1) * gray_nums, gray_nums, lane_slots=lane_slots)
            self.update(config)
        elif config.lane_slots < lane_slots and config.gray_queue_nums:
            grown = config.queue_nums + (lane_slots - config.lane_slots) * config.gray_queue_nums
            self.update(replace(config, queue_nums=grown, lane_slots=lane_slots))
            config = self.require(topic)
        return config

    def ensure(self, topic: str, queue_nums: int, gray_queue_nums: int) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            config = TopicConfig(topic, queue_nums, gray_queue_nums)
            self.update(config)
        return config


@functools.lru_cache(maxsize=1024)
def _slot_lanes(lanes: LanePairs | None) -> dict[int, str]:
    """Slot -> the lane holding it (no map heard: slot 0 is ``gray``'s), once per lane map, not per pull."""
    return {slot: lane for lane, slot in (lanes if lanes is not None else ((GRAY_LANE, 0),))}


def _shrinks(current: TopicConfig, config: TopicConfig) -> str | None:
    """Why ``config`` may not replace ``current``: its queues or its lane slots would shrink below what is stored."""
    if config.queue_nums < current.queue_nums:
        return f"cannot shrink from {current.queue_nums} to {config.queue_nums} queues"
    if config.lane_slots < current.lane_slots:
        return f"cannot shrink from {current.lane_slots} to {config.lane_slots} lane slots"
    return None
