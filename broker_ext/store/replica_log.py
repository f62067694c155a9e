"""The commit log as replication copies it: a leader reads whole records from an offset, a follower writes them at
the same offsets and dispatches them as if appended, and a deposed replica moves aside what the new leader's log
does not hold.

Replicas of a set hold byte-identical logs: the same records at the same physical offsets, segments rolled at the
same places (equal ``segment_size``, checked by the follower), so an offset means the same everywhere and a follower
resumes from its own log end. A chunk never crosses a segment: when the leader's next record is in the next
segment, the chunk ends there and says so (``next_offset`` at the segment boundary), and the follower rolls too.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

from graymq.broker_ext.store.commitlog import (
    BLANK_MAGIC,
    SIZE_AND_MAGIC,
    RecordHeader,
    frame_fields,
    record_tags,
    record_topic,
)
from graymq.broker_ext.store.index_file import index_entries
from graymq.broker_ext.store.message_store import MessageStore
from graymq.protocol.constants import tag_hash
from graymq.protocol.errors import GrayMQError
from graymq.protocol.record import decode_properties

log = logging.getLogger(__name__)


class ReplicationError(GrayMQError):
    """What a follower was sent does not fit its log (a gap, a damaged record, another segment size)."""

    retriable = True


class Chunk(NamedTuple):
    data: bytes  # whole records, from the offset asked for
    next_offset: int  # where the follower asks next: after ``data``, or the next segment's start


def read_chunk(store: MessageStore, offset: int, max_bytes: int) -> Chunk:
    """Whole records of the leader's log from ``offset``, at most ``max_bytes`` (at least one record when one is
    there). An ``offset`` below the log's start answers an empty chunk pointing at the start; past the end, an
    error (the follower holds what this log does not: it must truncate first)."""
    commitlog = store.commitlog
    if offset > commitlog.max_offset:
        raise ReplicationError(f"offset {offset} is past this log's end {commitlog.max_offset}")
    if offset < commitlog.min_offset:
        return Chunk(b"", commitlog.min_offset)
    segment = commitlog.segment_for(offset)
    if segment is None:  # at the end: nothing new
        return Chunk(b"", offset)
    view, size = segment.view, segment.size
    written = min(commitlog.max_offset, segment.end) - segment.start
    start = pos = offset - segment.start
    sealed = segment is not commitlog.segments[-1]  # rolled: once its records are read, the next segment follows
    while pos < written:
        if size - pos < SIZE_AND_MAGIC.size or SIZE_AND_MAGIC.unpack_from(view, pos)[1] == BLANK_MAGIC:
            sealed = True  # the end-of-segment marker, or too little room left for one
            break
        record = SIZE_AND_MAGIC.unpack_from(view, pos)[0]
        if pos > start and pos + record - start > max_bytes:
            sealed = False
            break
        pos += record
    chunk = Chunk(bytes(view[start:pos]), segment.end if sealed else segment.start + pos)
    commitlog.served(pos - start)  # after the copy: a release first would fault the chunk in again
    return chunk


def apply_chunk(store: MessageStore, offset: int, chunk: Chunk, segment_size: int) -> int:
    """Write a chunk the leader read at ``offset`` and dispatch its records to consume queues and the key index;
    returns the new log end. Every record is checked (size, magic, physical offset, CRC) before a byte is written:
    a bad chunk changes nothing and raises ``ReplicationError``."""
    commitlog = store.commitlog
    if segment_size != commitlog.segment_size:
        raise ReplicationError(f"the leader's segment size is {segment_size}, this replica's "
                               f"{commitlog.segment_size}: start every replica of a set with the same one")
    if offset != commitlog.max_offset:
        raise ReplicationError(f"a chunk at {offset} does not continue this log, which ends at {commitlog.max_offset}")
    data = chunk.data
    if not commitlog.segments:
        commitlog.max_offset = offset  # an empty replica's log starts where the leader's does
    headers = _checked(data, offset)
    if data:
        if not commitlog.segments or commitlog.room_left() < len(data):
            commitlog.roll(len(data))
            if commitlog.max_offset != offset:
                raise ReplicationError(f"a chunk at {offset} would land at {commitlog.max_offset} after a roll")
        segment_start = commitlog.segments[-1].start
        commitlog.append(data)
        store._flush.appended(offset, commitlog.max_offset)  # noqa: SLF001 - the store package's own
        _dispatch(store, data, offset, headers, segment_start)
    if chunk.next_offset > commitlog.max_offset:
        commitlog.roll(commitlog.segment_size)  # the leader rolled: seal this segment as it did
        if commitlog.max_offset != chunk.next_offset:
            raise ReplicationError(f"the leader's next segment starts at {chunk.next_offset}, this replica's at "
                                   f"{commitlog.max_offset}")
    return commitlog.max_offset


def _checked(data: bytes, offset: int) -> list[RecordHeader]:
    view = memoryview(data)
    headers, pos = [], 0
    while pos < len(data):
        fields = frame_fields(view, pos, offset + pos, len(data) - pos)
        if isinstance(fields, str):
            raise ReplicationError(f"record at {offset + pos} from the leader is not sound: {fields}")
        headers.append(RecordHeader._make(fields))
        pos += fields[0]
    return headers


def _dispatch(store: MessageStore, data: bytes, offset: int, headers: list[RecordHeader], segment_start: int) -> None:
    view = memoryview(data)
    entries = []
    pos = 0
    for header in headers:
        size = header.total_size
        topic = record_topic(view, pos, header)
        queue = store.queues.get(topic, header.queue_id) or store.queues.create(topic, header.queue_id)
        queue.put_unit(header.queue_offset, offset + pos, size, tag_hash(record_tags(view[pos:pos + size])))
        props_start = pos + size - header.properties_len
        properties = decode_properties(bytes(view[props_start:pos + size]))
        entry = index_entries(topic, properties, offset + pos, header.store_timestamp)
        if entry:
            entries.append(entry)
        store.stats.put_count += 1
        pos += size
    store.stats.put_bytes += len(data)
    if headers:
        store._last_store_timestamp = max(store._last_store_timestamp, headers[-1].store_timestamp)  # noqa: SLF001
    if entries:
        store.index.add(segment_start, b"".join(entries))


def move_aside(store: MessageStore, end: int, aside_dir: Path, epoch: int) -> int:
    """Cut the log at ``end`` (the new leader's log end when it was elected), keeping the bytes past it in
    ``aside_dir`` (a file named by epoch and offsets, for counting and re-publishing), and drop the consume-queue
    units and index entries past it. Returns how many bytes were moved aside (0: nothing past ``end``)."""
    commitlog = store.commitlog
    if end >= commitlog.max_offset:
        return 0
    moved = commitlog.max_offset - end
    aside_dir.mkdir(parents=True, exist_ok=True)
    path = aside_dir / f"epoch-{epoch:06d}-{end:020d}-{commitlog.max_offset:020d}.log"
    with open(path, "wb") as out:
        for segment in commitlog.segments:
            lo, hi = max(end, segment.start), min(commitlog.max_offset, segment.end)
            if lo < hi:
                out.write(segment.view[lo - segment.start:hi - segment.start])
        out.flush()
        os.fsync(out.fileno())
    commitlog.truncate(end)
    store.queues.truncate_past(end)
    store.index.truncate_from(end)
    store._flush.flushed_offset = min(store._flush.flushed_offset, end)  # noqa: SLF001
    log.warning("moved %d bytes past offset %d aside to %s: the new leader's log (epoch %d) does not hold them",
                moved, end, path, epoch)
    return moved
