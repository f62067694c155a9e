"""A push consumer's settings in two frozen values: how it consumes (``ConsumeOptions``) and its tuning
(``ConsumerSettings``: batch sizes, concurrency, intervals, the drain timeout)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from graymq.client.consumer.start_offset import ConsumeFrom


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Tuning of a ``PushConsumer``; each field is also accepted as a keyword argument of the consumer.

    >>> ConsumerSettings(pull_batch_size=64).consume_batch_size
    1
    """

    pull_batch_size: int = 32  # messages asked for per pull request
    consume_batch_size: int = 1  # messages handed to the listener per call (1 when orderly)
    max_threads: int = 8  # listener threads; twice as many batches may wait for one
    max_in_flight_per_queue: int = 1000  # pulled but unfinished messages of a queue before its pulls pause
    # between rebalances, as RocketMQ's 20 s: a safety net, since "group changed" from a broker, a flip or a lost
    # queue starts one at once
    rebalance_interval_s: float = 20.0
    # between heartbeats to the brokers (RocketMQ 5 clients: 10 s); shorter where a broker's answer asks, to beat
    # four times within its client expiry (default 120 s) and its queue lease (default 30 s: every 7.5 s)
    heartbeat_interval_s: float = 10.0
    nameserver_interval_s: float = 5.0  # between heartbeats to the name server
    long_poll_s: float = 15.0  # how long a broker holds a pull that finds nothing new (RocketMQ's 15 s)
    handover_timeout_s: float = 30.0  # a queue handed over waits this long for its running batches to finish
    drain_timeout_s: float = 300.0  # a gray → normal drain that takes longer stays gray and says why
    drain_poll_s: float = 0.05  # between the gray backlog checks of a drain
    persist_interval_s: float = 1.0  # between offset commits
    max_reconsume_times: int = 16  # deliveries of a failing message before it goes to the dead-letter queue


@dataclass(frozen=True, slots=True)
class ConsumeOptions:
    """How a ``PushConsumer`` consumes; each field is also accepted as a keyword argument of the consumer."""

    broadcasting: bool = False  # every client of its side consumes every queue; offsets kept in ``offset_dir``
    consume_from: ConsumeFrom = "last"  # where a queue the group never committed starts
    consume_timestamp_ms: int = 0  # with consume_from="timestamp"
    orderly: bool = False  # one message at a time per queue, retried in place instead of sent back
    offset_dir: Path | None = None  # broadcasting: where offsets are kept (default ./graymq-data/offsets)


def apply_keywords(options: ConsumeOptions | None, settings: ConsumerSettings | None,
                   keywords: dict[str, Any]) -> tuple[ConsumeOptions, ConsumerSettings]:
    """``options`` and ``settings`` (defaults when None) with the fields named in ``keywords`` replaced; a name
    neither has raises ``TypeError`` naming it.

    >>> apply_keywords(None, None, {"orderly": True, "long_poll_s": 1.0})[0].orderly
    True
    """
    names = {f.name for f in fields(ConsumeOptions)}
    ours = {name: value for name, value in keywords.items() if name in names}
    tuning = {name: value for name, value in keywords.items() if name not in names}
    return replace(options or ConsumeOptions(), **ours), replace(settings or ConsumerSettings(), **tuning)
