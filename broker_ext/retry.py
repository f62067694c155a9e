"""Consumer send-back: failed messages go to ``%RETRY%<group>`` after a delay, then to ``%DLQ%<group>``.

A delayed message is first stored in ``SCHEDULE_TOPIC_XXXX`` (queue = delay level - 1) and
moved to its real topic by ``ScheduleMessageService`` once due. A gray client's retries land
in the gray queues of the retry topic, so they stay on the gray side.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from graymq.broker_ext.store import PutMessage
from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.constants import (
    DEFAULT_MAX_RECONSUME_TIMES,
    PROPERTY_DELAY_LEVEL,
    PROPERTY_ORIGIN_MSG_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    SCHEDULE_TOPIC,
    dlq_topic,
    retry_topic,
)
from graymq.protocol.errors import MessageNotFoundError
from graymq.protocol.gray import normal_queue_ids
from graymq.protocol.record import decode_record
from graymq.protocol.remoting import response_envelope

if TYPE_CHECKING:
    from graymq.broker_ext.broker_controller import BrokerController

log = logging.getLogger(__name__)


class SendBackProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def send_back(self, req: pb.SendBackRequest, check_topic: Callable[[str], None]) -> bytes:
        """Store the failed message again for a later retry; ``check_topic`` raises unless the caller may
        consume the stored message's topic in its group (only its own messages can be copied)."""
        broker = self.broker
        raw = broker.store.read_record(req.commit_log_offset)
        if raw is None:
            raise MessageNotFoundError(f"no message at commit log offset {req.commit_log_offset} to send back")
        msg = decode_record(raw)
        check_topic(msg.topic)
        reconsume_times = msg.reconsume_times + 1
        max_times = req.max_reconsume_times or DEFAULT_MAX_RECONSUME_TIMES
        properties = dict(msg.properties)
        properties.setdefault(PROPERTY_RETRY_TOPIC, req.origin_topic or msg.topic)
        properties.setdefault(PROPERTY_ORIGIN_MSG_ID, msg.msg_id)
        if reconsume_times > max_times:
            topic = broker.topics.ensure(dlq_topic(req.consumer_group), 1, 0)
            put = PutMessage(topic.topic, 0, msg.body, properties, msg.sys_flag, msg.born_timestamp, msg.born_host,
                             reconsume_times)
            broker.append([put])
            log.info("message %s of %s moved to %s after %d attempts", msg.msg_id, req.consumer_group, topic.topic,
                     reconsume_times - 1)
            return response_envelope(pb.CONSUMER_SEND_BACK)
        config = broker.topics.ensure_retry_topic(retry_topic(req.consumer_group))
        group = broker.consumers.get(req.consumer_group)
        gray_side = req.gray_flag and bool(config.gray_queues) and (group is None or group.gray_switch)
        choices = config.gray_queues if gray_side else normal_queue_ids(config.queue_nums, config.gray_queue_nums)
        queue_id = choices[zlib.crc32(msg.msg_id.encode()) % len(choices)]
        levels = broker.settings.delay_levels_s
        level = min(req.delay_level or 3 + msg.reconsume_times, len(levels))
        properties.update({PROPERTY_REAL_TOPIC: config.topic, PROPERTY_REAL_QUEUE_ID: str(queue_id),
                           PROPERTY_DELAY_LEVEL: str(level)})
        broker.topics.ensure(SCHEDULE_TOPIC, len(levels), 0)
        put = PutMessage(SCHEDULE_TOPIC, level - 1, msg.body, properties, msg.sys_flag, msg.born_timestamp,
                         msg.born_host, reconsume_times)
        broker.append([put])
        broker.schedule.pending[(config.topic, queue_id)] += 1
        return response_envelope(pb.CONSUMER_SEND_BACK)


class ScheduleMessageService:
    """Moves due messages from the schedule topic's per-level queues to their real topic and queue."""

    def __init__(self, broker: BrokerController, config_dir: Path, interval_s: float = 0.05) -> None:
        self.broker = broker
        self._path = config_dir / "delay_offsets.json"
        self._offsets: dict[int, int] = {}
        # (real topic, real queue id) -> delayed messages not yet delivered; a drain counts them as backlog
        self.pending: Counter[tuple[str, int]] = Counter()
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.paused = False

    def load(self) -> None:
        """Read delivery offsets and recount the undelivered messages (call after the store is loaded)."""
        self._offsets = {int(k): int(v) for k, v in read_json(self._path, {}).items()}
        if self.broker.topics.get(SCHEDULE_TOPIC) is None:
            return
        for index in range(len(self.broker.settings.delay_levels_s)):
            offset = max(self._offsets.get(index, 0), self.broker.store.get_min_offset(SCHEDULE_TOPIC, index))
            while True:
                result = self.broker.store.get_messages(SCHEDULE_TOPIC, index, offset, 256)
                for raw in result.records:
                    props = decode_record(raw).properties
                    self.pending[(props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID]))] += 1
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

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="schedule-service")

    def pause(self) -> None:
        """A follower of a broker set delivers nothing: its leader does, and the deliveries come in its log."""
        self.paused = True

    def resume(self) -> None:
        """Deliver again (a new leader): delivery offsets as last taken from the old leader, pending recounted."""
        self.pending.clear()
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
                    await self.broker.file_work.write_json(self._path, self.snapshot())
            except Exception:
                log.exception("schedule service failed; retrying")
            await asyncio.sleep(self._interval_s)

    def deliver_due(self, now_ms: int) -> int:
        """Deliver every due delayed message; returns how many moved."""
        broker = self.broker
        if self.paused or broker.topics.get(SCHEDULE_TOPIC) is None:
            return 0
        moved = 0
        for index, delay_s in enumerate(broker.settings.delay_levels_s):
            offset = max(self._offsets.get(index, 0), broker.store.get_min_offset(SCHEDULE_TOPIC, index))
            while True:
                result = broker.store.get_messages(SCHEDULE_TOPIC, index, offset, 32)
                if not result.records:
                    break
                due = []
                next_offset = offset
                for raw in result.records:
                    msg = decode_record(raw)
                    if msg.store_timestamp + delay_s * 1000 > now_ms:
                        break
                    next_offset = msg.queue_offset + 1
                    properties = dict(msg.properties)
                    topic = properties.pop(PROPERTY_REAL_TOPIC)
                    queue_id = int(properties.pop(PROPERTY_REAL_QUEUE_ID))
                    properties.pop(PROPERTY_DELAY_LEVEL, None)
                    self.pending[(topic, queue_id)] -= 1
                    due.append(PutMessage(topic, queue_id, msg.body, properties, msg.sys_flag, msg.born_timestamp,
                                          msg.born_host, msg.reconsume_times))
                if due:
                    broker.append(due)
                    moved += len(due)
                if len(due) < len(result.records):
                    self._offsets[index] = next_offset
                    break
                offset = self._offsets[index] = result.next_begin_offset
        return moved
