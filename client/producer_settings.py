"""A producer's tuning in one frozen value (``ProducerSettings``), beside the consumer's
(client/consumer/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from graymq.protocol.errors import BadRequestError


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """Tuning of a ``Producer``; each field is also accepted as a keyword argument of the producer.

    >>> ProducerSettings(retry_times=0).send_timeout_s
    3.0
    """

    retry_times: int = 2  # counted failures a send may retry (1 + retry_times attempts)
    send_timeout_s: float = 3.0  # a send's whole budget, retries included (``send(timeout_s=...)`` replaces it)
    heartbeat_interval_s: float = 2.0  # between heartbeats to the name server
    route_ttl_s: float = 30.0  # a cached route is refreshed after this long (used when no ``config`` is given)
    auto_batch: bool = True  # join the sends of one loop turn into SEND_BATCH requests (client/accumulator.py)
    batch_max_messages: int = 64  # an auto batch leaves at once with this many messages
    batch_max_bytes: int = 1 << 20  # ... or this many body bytes
    register: bool = True  # heartbeat in the name server; False: a helper sending on a side decided elsewhere

    def __post_init__(self) -> None:
        if self.retry_times < 0:
            raise BadRequestError("retry_times must be >= 0")


def producer_settings(settings: ProducerSettings | None, keywords: dict[str, Any]) -> ProducerSettings:
    """``settings`` (defaults when None) with the fields named in ``keywords`` replaced; an unknown name raises
    ``TypeError`` naming it.

    >>> producer_settings(None, {"auto_batch": False}).auto_batch
    False
    """
    return replace(settings or ProducerSettings(), **keywords)
