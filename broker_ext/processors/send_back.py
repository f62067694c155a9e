"""Consumer send-back: failed messages go to ``%RETRY%<group>`` after a delay, then to ``%DLQ%<group>``.

A delayed message is first stored in ``SCHEDULE_TOPIC_XXXX`` (queue = delay level - 1) and
moved to its real topic by ``ScheduleMessageService`` once due. A message due at a given time (a stock producer's
``delivery_timestamp``) rides the same levels as a hierarchical wheel: it waits in the largest level that fits the
time left, and when that level hands it out it goes to its real topic if due, else to the next level that fits
(each level keeps its one fixed delay, so its queue stays in due order). A lane client's retries land in its
lane's slot of the retry topic (the gray client's in the gray queues), so they stay in the lane; a retry topic
has as many lane slots as its group's topics (``retry_queue_ids``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.group_info import client_lane
from graymq.broker_ext.processors.put_message_service import PutMessageService
from graymq.broker_ext.store import AppendResult, MessageStore, PutMessage
from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.broker_ext.store.background import BlockingWork
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.constants import (
    DEFAULT_MAX_RECONSUME_TIMES,
    PROPERTY_DELAY_LEVEL,
    PROPERTY_ORIGIN_MSG_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_START_DELIVER_TIME,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    dlq_topic,
    retry_topic,
)
from graymq.protocol.errors import MessageNotFoundError
from graymq.protocol.record import MessageExt, decode_record
from graymq.protocol.remoting import response_envelope
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)


class ScheduleMessageService:
    """Holds delayed messages in the schedule topic's per-level queues and moves each to its real topic and queue
    once due; counts, per real queue, those not delivered yet (a drain counts them as backlog)."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager,
                 append: Callable[[list[PutMessage]], list[AppendResult]], file_work: BlockingWork,
                 delay_levels_s: Sequence[float], config_dir: Path,
                 interval_s: float = 0.05) -> None:
        self._store = store
        self._topics = topics
        self._append = append
        self._file_work = file_work
        self._levels = tuple(delay_levels_s)
        self._path = config_dir / "delay_offsets.json"
        self._offsets: dict[int, int] = {}
        self._pending: Counter[tuple[str, int]] = Counter()  # (real topic, real queue id) -> not delivered yet
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.paused = False

    @property
    def level_count(self) -> int:
        return len(self._levels)

    def schedule(self, put: PutMessage, level: int) -> None:
        """Store ``put`` (addressed to its real topic and queue) until delay ``level`` (1-based) has passed."""
        self._hold(put, level, {})

    def schedule_at(self, put: PutMessage, deliver_at_ms: int, now_ms: int) -> AppendResult:
        """Store ``put`` until ``deliver_at_ms`` (after ``now_ms``): delivered no earlier, and at most the
        smallest level's delay (plus a delivery round) later. Returns where it waits."""
        level = level_for(self._levels, deliver_at_ms - now_ms)
        return self._hold(put, level, {PROPERTY_START_DELIVER_TIME: str(deliver_at_ms)})

    def _hold(self, put: PutMessage, level: int, extra: dict[str, str]) -> AppendResult:
        self._topics.ensure(SCHEDULE_TOPIC, len(self._levels), 0)
        properties = {**put.properties, PROPERTY_REAL_TOPIC: put.topic, PROPERTY_REAL_QUEUE_ID: str(put.queue_id),
                      PROPERTY_DELAY_LEVEL: str(level), **extra}
        (result,) = self._append([replace(put, topic=SCHEDULE_TOPIC, queue_id=level - 1, properties=properties)])
        self._pending[(put.topic, put.queue_id)] += 1
        return result

    def pending(self, topic: str, queue_id: int) -> int:
        """Delayed messages on their way to this queue, not delivered yet."""
        return self._pending[(topic, queue_id)]

    def load(self) -> None:
        """Read delivery offsets and recount the undelivered messages (call after the store is loaded)."""
        self._offsets = {int(k): int(v) for k, v in read_json(self._path, {}).items()}
        if self._topics.get(SCHEDULE_TOPIC) is None:
            return
        for index in range(len(self._levels)):
            offset = max(self._offsets.get(index, 0), self._store.get_min_offset(SCHEDULE_TOPIC, index))
            while True:
                result = self._store.get_messages(SCHEDULE_TOPIC, index, offset, 256)
                for raw in result.records:
                    props = decode_record(raw).properties
                    self._pending[(props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID]))] += 1
                if not result.records:
                    break
                offset = result.next_begin_offset

    def persist(self) -> None:
        write_json_atomic(self._path, self.snapshot())

    def snapshot(self) -> dict[str, int]:
        """Delivery offset per delay level."""
        return {str(k): v for k, v in self._offsets.items()}

    def replace_offsets(self, offsets: dict[int, int]) -> None:
        """Take the delivery offsets as given (a follower, from its leader), written when they changed."""
        if offsets != self._offsets:
            self._offsets = dict(offsets)
            self.persist()

    def start(self, supervisor: Supervisor) -> None:
        """Deliver every ``interval_s`` in a task ``supervisor`` tracks (a failed round is logged and retried)."""
        self._task = supervisor.spawn("schedule-service", self._run)

    def pause(self) -> None:
        """A follower of a broker set delivers nothing: its leader does, and the deliveries come in its log."""
        self.paused = True

    def resume(self) -> None:
        """Deliver again (a new leader): delivery offsets as last taken from the old leader, pending recounted."""
        self._pending.clear()
        self.load()
        self.paused = False

    async def stop(self) -> None:
        """Stop delivering; the broker writes the offsets last, once background writes are done."""
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            try:
                if self.deliver_due(int(time.time() * 1000)):
                    # written and fsynced off the loop, one write at a time (this loop awaits it)
                    await self._file_work.write_json(self._path, self.snapshot())
            except Exception:  # one message that cannot move must not stop the others' delivery for long
                log.exception("schedule service failed; retrying")
            await asyncio.sleep(self._interval_s)

    def deliver_due(self, now_ms: int) -> int:
        """Deliver every due delayed message; returns how many moved."""
        if self.paused or self._topics.get(SCHEDULE_TOPIC) is None:
            return 0
        return sum(self._deliver_level(index, delay_s, now_ms) for index, delay_s in enumerate(self._levels))

    def _deliver_level(self, index: int, delay_s: float, now_ms: int) -> int:
        """Deliver the due messages of one delay level's queue, oldest first; returns how many moved."""
        moved = 0
        offset = max(self._offsets.get(index, 0), self._store.get_min_offset(SCHEDULE_TOPIC, index))
        while True:
            result = self._store.get_messages(SCHEDULE_TOPIC, index, offset, 32)
            if not result.records:
                return moved
            due = []
            next_offset = offset
            for raw in result.records:
                msg = decode_record(raw)
                if msg.store_timestamp + delay_s * 1000 > now_ms:
                    break
                next_offset = msg.queue_offset + 1
                due.append(self._next_hop(msg, now_ms))
            if due:
                self._append(due)
                moved += len(due)
            if len(due) < len(result.records):
                self._offsets[index] = next_offset
                return moved
            offset = self._offsets[index] = result.next_begin_offset

    def _next_hop(self, msg: MessageExt, now_ms: int) -> PutMessage:
        """Where a message its level hands out goes: its real topic and queue, or (a due time not reached yet)
        the next level that fits the time left, still counted as pending."""
        properties = dict(msg.properties)
        deliver_at = properties.get(PROPERTY_START_DELIVER_TIME)
        if deliver_at is not None and int(deliver_at) > now_ms:
            properties[PROPERTY_DELAY_LEVEL] = str(level := level_for(self._levels, int(deliver_at) - now_ms))
            return PutMessage(SCHEDULE_TOPIC, level - 1, msg.body, properties, msg.sys_flag, msg.born_timestamp,
                              msg.born_host, msg.reconsume_times)
        topic = properties.pop(PROPERTY_REAL_TOPIC)
        queue_id = int(properties.pop(PROPERTY_REAL_QUEUE_ID))
        properties.pop(PROPERTY_DELAY_LEVEL, None)
        properties.pop(PROPERTY_START_DELIVER_TIME, None)
        self._pending[(topic, queue_id)] -= 1
        return PutMessage(topic, queue_id, msg.body, properties, msg.sys_flag, msg.born_timestamp, msg.born_host,
                          msg.reconsume_times)


def level_for(levels_s: Sequence[float], left_ms: int) -> int:
    """The delay level (1-based) a message due in ``left_ms`` waits in: the largest whose delay fits the time left,
    the smallest when none does (it is then delivered late by at most that level's delay)."""
    fitting = [index for index, delay_s in enumerate(levels_s) if delay_s * 1000 <= left_ms]
    return (fitting[-1] if fitting else 0) + 1


class SendBackProcessor:
    def __init__(self, store: MessageStore, topics: TopicConfigManager, consumers: ConsumerManager,
                 put_service: PutMessageService, schedule: ScheduleMessageService) -> None:
        self._store = store
        self._topics = topics
        self._consumers = consumers
        self._put_service = put_service
        self._schedule = schedule

    def send_back(self, req: pb.SendBackRequest, check_topic: Callable[[str], None]) -> bytes:
        """Store the failed message again for a later retry; ``check_topic`` raises unless the caller may
        consume the stored message's topic in its group (only its own messages can be copied).

        Its ``RETRY_TOPIC`` (the topic a retry stands for) is the stored message's topic, or, for a message of a
        retry topic, the one this broker wrote when it first sent it back: never the request's ``origin_topic``
        nor a producer's (the send paths strip the name)."""
        raw = self._store.read_record(req.commit_log_offset)
        if raw is None:
            raise MessageNotFoundError(f"no message at commit log offset {req.commit_log_offset} to send back")
        msg = decode_record(raw)
        check_topic(msg.topic)
        reconsume_times = msg.reconsume_times + 1
        max_times = req.max_reconsume_times or DEFAULT_MAX_RECONSUME_TIMES
        properties = dict(msg.properties)
        if not msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or PROPERTY_RETRY_TOPIC not in properties:
            properties[PROPERTY_RETRY_TOPIC] = msg.topic
        properties.setdefault(PROPERTY_ORIGIN_MSG_ID, msg.msg_id)
        if reconsume_times > max_times:
            self.dead_letter(req.consumer_group, msg, properties, reconsume_times)
            return response_envelope(pb.CONSUMER_SEND_BACK)
        origin = self._topics.get(properties[PROPERTY_RETRY_TOPIC])
        config = self._topics.ensure_retry_topic(retry_topic(req.consumer_group),
                                                 origin.lane_slots if origin is not None else 1)
        group = self._consumers.get(req.consumer_group)
        lane = client_lane(req.gray_flag, req.lane) if group is None or group.gray_switch else None
        choices = retry_queue_ids(config, origin, lane)
        queue_id = choices[zlib.crc32(msg.msg_id.encode()) % len(choices)]
        level = min(req.delay_level or 3 + msg.reconsume_times, self._schedule.level_count)
        self._schedule.schedule(PutMessage(config.topic, queue_id, msg.body, properties, msg.sys_flag,
                                           msg.born_timestamp, msg.born_host, reconsume_times), level)
        return response_envelope(pb.CONSUMER_SEND_BACK)

    def dead_letter(self, group: str, msg: MessageExt, properties: dict[str, str], reconsume_times: int) -> None:
        """Store ``msg`` (with ``properties``) in ``%DLQ%<group>``: its ``reconsume_times - 1`` attempts are over."""
        topic = self._topics.ensure(dlq_topic(group), 1, 0)
        put = PutMessage(topic.topic, 0, msg.body, properties, msg.sys_flag, msg.born_timestamp, msg.born_host,
                         reconsume_times)
        self._put_service.append([put])
        log.info("message %s of %s moved to %s after %d attempts", msg.msg_id, group, topic.topic,
                 reconsume_times - 1)


def retry_queue_ids(config: TopicConfig, origin: TopicConfig | None, lane: str | None) -> tuple[int, ...]:
    """The queues of retry topic ``config`` a retry of a consumer in ``lane`` (None: base) may go to: its lane's
    slot, so a lane's retries stay in the lane; the base queues for a base consumer.

    The lane's slot is the one the retry topic's lane map gives it; while that map names no slot for the lane (the
    name server has not given it one there yet, or its map is not heard yet), the slot the lane holds on the origin
    topic (a retry topic's slots mirror its topics'), unless the retry topic's map gives that slot to another lane.
    A lane the broker knows no usable slot for gets the base queues (its retry is consumed, not stranded), logged.
    """
    if lane is None or not config.gray_queue_nums:
        return config.base_ids
    slot = config.slot_of_lane(lane)
    if slot is None and origin is not None:
        slot = origin.slot_of_lane(lane)
        holders = {held: name for name, held in config.lane_map.items()}
        if slot is not None and (slot >= config.lane_slots or holders.get(slot, lane) != lane):
            slot = None
    if slot is None:
        log.warning("retry topic %s: no slot known for lane %s; its retry goes to the base queues", config.topic,
                    lane)
        return config.base_ids
    return config.slot_ids(slot)
