"""Stream offsets: the next offset to read per queue, as the JSON Spark keeps in its checkpoint.

The JSON is ``{topic: {broker: {queue_id: offset}}}`` with sorted keys, so equal offsets
serialize to equal strings (Spark compares offsets by their JSON).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from graymq.client.message import MessageQueue

QueueOffsets = dict[MessageQueue, int]


def to_json(offsets: Mapping[MessageQueue, int]) -> dict[str, Any]:
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for mq, offset in offsets.items():
        nested.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = offset
    # a round trip through the serializer sorts every level
    result: dict[str, Any] = json.loads(json.dumps(nested, sort_keys=True))
    return result


def from_json(raw: Mapping[str, Any]) -> QueueOffsets:
    return {
        MessageQueue(topic, broker, int(queue_id)): int(offset)
        for topic, brokers in raw.items()
        for broker, queues in brokers.items()
        for queue_id, offset in queues.items()
    }


def processed_offsets(progress: Mapping[str, Any] | None, topics: Collection[str]) -> QueueOffsets:
    """The end offsets of the last micro-batch a streaming query completed, from its ``lastProgress``: those of its
    one source reading ``topics`` (offsets JSON as above); empty when it completed none, or when two sources read
    those topics (a pipeline joining another graymq stream: which is the job's is not known).

    >>> progress = {"sources": [{"endOffset": '{"T": {"b": {"1": 7}}}'}, {"endOffset": "null"}]}
    >>> processed_offsets(progress, ["T"])
    {MessageQueue(topic='T', broker_name='b', queue_id=1): 7}
    >>> processed_offsets(None, ["T"]), processed_offsets(progress, ["U"])
    ({}, {})
    """
    found: list[QueueOffsets] = []
    for source in (progress or {}).get("sources") or ():
        try:
            raw = json.loads(source.get("endOffset") or "null")
            if isinstance(raw, dict) and raw and set(raw) <= set(topics):
                found.append(from_json(raw))
        except (ValueError, TypeError, AttributeError):  # another source's offsets
            continue
    return found[0] if len(found) == 1 else {}


def cap_offsets(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int) -> QueueOffsets:
    """Advance from ``start`` towards ``latest`` by at most ``max_rows`` offsets in all, shared evenly.

    Queues with less to read than their share leave the rest to the others; queues missing
    from ``start`` begin at ``latest`` (nothing to read yet).

    >>> a, b = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    >>> sorted(cap_offsets({a: 0, b: 0}, {a: 2, b: 100}, 10).values())
    [2, 8]
    """
    end = {mq: start.get(mq, offset) for mq, offset in latest.items()}
    left = {mq: latest[mq] - end[mq] for mq in sorted(latest) if latest[mq] > end[mq]}
    budget = max_rows
    while budget > 0 and left:
        share = max(1, budget // len(left))
        for mq in list(left):
            take = min(share, left[mq], budget)
            end[mq] += take
            budget -= take
            left[mq] -= take
            if not left[mq]:
                del left[mq]
            if not budget:
                break
    return end
