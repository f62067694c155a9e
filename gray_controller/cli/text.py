"""How values read in human output: queue sets as id ranges, timings in seconds, label selectors, consume health."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graymq.protocol.health import failure_rate

QUEUES_WIDTH = 60


def _runs(ids: Iterable[int]) -> list[tuple[str, int]]:
    """(text, how many ids) per item of the collapsed list: runs of three or more become ``a-b``."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    items: list[tuple[str, int]] = []
    for a, b in runs:
        items += [(f"{a}-{b}", b - a + 1)] if b > a + 1 else [(str(i), 1) for i in range(a, b + 1)]
    return items


def id_ranges(ids: Iterable[int]) -> str:
    """Sorted ids with runs collapsed.

    >>> id_ranges([5, 0, 1, 2, 3, 7, 8])
    '0-3,5,7,8'
    """
    return ",".join(text for text, _ in _runs(ids))


def format_queues(queues: Iterable[str], width: int = QUEUES_WIDTH) -> str:
    """``broker:topic:queue_id`` strings as ``broker:topic:ids`` per (broker, topic), cut at about ``width``
    characters with the number of queues left out.

    >>> format_queues(["b:T:0", "b:T:5", "b:T:1", "b:%RETRY%G:0"])
    'b:T:0,1,5 b:%RETRY%G:0'
    >>> format_queues([f"broker-a:TOPIC_{t}:{q}" for t in range(5) for q in range(8)])
    'broker-a:TOPIC_0:0-7 broker-a:TOPIC_1:0-7 … +24 queues'
    """
    by_topic: dict[str, list[int]] = {}
    unparsed: list[str] = []
    for queue in queues:
        broker_topic, _, queue_id = queue.rpartition(":")
        if broker_topic and queue_id.isdigit():
            by_topic.setdefault(broker_topic, []).append(int(queue_id))
        else:
            unparsed.append(queue)
    # a topic's own queues first, its group's retry and dead-letter queues (``%RETRY%G``, ``%DLQ%G``) after them
    ordered = sorted(by_topic.items(), key=lambda item: (item[0].partition(":")[2].startswith("%"), item[0]))
    parts = [(f"{broker_topic}:", _runs(ids)) for broker_topic, ids in ordered]
    parts += [("", [(queue, 1)]) for queue in sorted(unparsed)]
    left = sum(count for _, items in parts for _, count in items)
    text = ""
    for prefix, items in parts:
        for i, (item, count) in enumerate(items):
            piece = f"{' ' if text else ''}{prefix}{item}" if i == 0 else f",{item}"
            more = f" … +{left - count} queues" if left > count else ""
            if text and len(text + piece + more) > width:
                return f"{text} … +{left} queues"
            text, left = text + piece, left - count
    return text


def format_timings(timings_s: Mapping[str, float]) -> str:
    """Step timings in seconds, in the order they ran.

    >>> format_timings({"producers": 0.055, "drain": 0.192})
    'producers 0.06 s, drain 0.19 s'
    """
    return ", ".join(f"{step} {seconds:.2f} s" for step, seconds in timings_s.items())


def format_labels(labels: Mapping[str, str]) -> str:
    """A label selector as ``k=v,k2=v2`` (sorted by key).

    >>> format_labels({"version": "v2", "app": "orders"})
    'app=orders,version=v2'
    """
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def in_use_text(what: str, detail: Any) -> str:
    """One line for a deletion refused while live clients use ``what`` (the name server's 409 detail)."""
    clients = detail.get("clients") if isinstance(detail, dict) else None
    if not clients:
        return f"{what} cannot be deleted now: {detail}"
    listed = ", ".join(f"{c['client_id']} ({c['role']}{' of ' + c['group'] if 'group' in c else ''})"
                       for c in clients)
    expiry = detail.get("client_expiry_seconds")
    forgotten = f"; a client killed without a clean stop is forgotten {expiry} s after its last heartbeat" \
        if expiry else ""
    return f"{what} is in use by live clients: {listed}: stop them first{forgotten}"


def format_side(figures: Mapping[str, float]) -> str:
    """One side's consume health: ``consumed 1,200, failed 3 (0.2%), sent back 3, dead-lettered 0, p50/p99 1.2/8.0 ms``.

    >>> format_side({"consumed": 1200, "failed": 3, "sent_back": 3, "dead_lettered": 0, "p50_ms": 1.2, "p99_ms": 8})
    'consumed 1,200, failed 3 (0.2%), sent back 3, dead-lettered 0, p50/p99 1.2/8.0 ms'
    """
    return (f"consumed {int(figures['consumed']):,}, failed {int(figures['failed']):,} "
            f"({failure_rate(figures):.1f}%), sent back {int(figures['sent_back']):,}, "
            f"dead-lettered {int(figures['dead_lettered']):,}, "
            f"p50/p99 {figures['p50_ms']:.1f}/{float(figures['p99_ms']):.1f} ms")
