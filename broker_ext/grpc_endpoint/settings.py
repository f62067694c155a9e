"""The settings a stock client gets back on its telemetry stream: its own, with what the broker decides.

Stock clients wait for this answer before their first send or receive (and fail every send without a
backoff policy or a body limit). The broker sets:

- ``backoff_policy``: producers, ``PRODUCER_MAX_ATTEMPTS`` with exponential backoff; consumers, redelivery after
  the broker's delay levels (the same ``%RETRY%`` schedule graymq's consumers get) and their group's maximum
  attempts (``GroupConsumption``: the name server's group, as RocketMQ's subscription group; 16 by default);
- producers: ``publishing.max_body_size`` (``EndpointLimits.max_body_size``) and message-type validation;
- consumers: ``subscription.receive_batch_size``, ``long_polling_timeout`` (at most the broker's long-poll
  limit) and ``fifo`` when their group is FIFO, the rest of their subscription kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration

from graymq.protocol.rocketmq_v2 import definition_pb2 as v2

PRODUCER_MAX_ATTEMPTS = 3
CONSUMER_MAX_ATTEMPTS = 16  # RocketMQ's default maximum deliveries before the dead-letter queue
RECEIVE_BATCH_SIZE = 32


@dataclass(frozen=True, slots=True)
class EndpointLimits:
    """What the endpoint allows and answers: body size, long polls, redelivery delays, and how long an auto-renewed
    delivery (a PushConsumer's: ``renewals``) stays invisible at a time and at most in all (RocketMQ proxy's renew
    slice and maximum renew time)."""

    max_body_size: int = 4 << 20  # RocketMQ's default
    long_polling_timeout_s: float = 20.0
    delay_levels_s: tuple[float, ...] = (1.0, 5.0, 10.0, 30.0)
    auto_renew_invisible_s: float = 60.0
    auto_renew_max_s: float = 3 * 3600.0


@dataclass(frozen=True, slots=True)
class GroupConsumption:
    """How a group's stock consumers consume, as the name server's group record says (RocketMQ keeps it in the
    subscription group): one message in flight per queue (``fifo``), deliveries before the dead-letter queue."""

    fifo: bool = False
    max_attempts: int = CONSUMER_MAX_ATTEMPTS


def _duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(int(seconds * 1e9))
    return duration


def merged_settings(client: v2.Settings, limits: EndpointLimits,
                    consumption: GroupConsumption = GroupConsumption()) -> v2.Settings:
    """``client``'s settings as the broker answers them.

    >>> s = merged_settings(v2.Settings(client_type=v2.PRODUCER), EndpointLimits(max_body_size=1024))
    >>> s.publishing.max_body_size, s.backoff_policy.max_attempts
    (1024, 3)
    """
    merged = v2.Settings()
    merged.CopyFrom(client)
    if client.client_type == v2.PRODUCER:
        merged.backoff_policy.CopyFrom(v2.RetryPolicy(
            max_attempts=PRODUCER_MAX_ATTEMPTS,
            exponential_backoff=v2.ExponentialBackoff(initial=_duration(0.01), max=_duration(1.0), multiplier=2.0)))
    else:
        merged.backoff_policy.CopyFrom(v2.RetryPolicy(
            max_attempts=consumption.max_attempts,
            customized_backoff=v2.CustomizedBackoff(next=[_duration(s) for s in limits.delay_levels_s])))
    if client.client_type == v2.PRODUCER:  # publishing and subscription are one oneof: set only the client's
        merged.publishing.max_body_size = limits.max_body_size
        merged.publishing.validate_message_type = True
    else:
        merged.subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        merged.subscription.long_polling_timeout.CopyFrom(_duration(limits.long_polling_timeout_s))
        merged.subscription.fifo = client.subscription.fifo or consumption.fifo
    return merged
