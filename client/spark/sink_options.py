"""Options of the ``graymq`` sink (``df.write`` / ``df.writeStream``), validated once on the driver.

As for reading, Spark hands the options with lower-cased keys; a bad value is a ``ConfigError``
naming the option and an unknown option is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from graymq.client.spark.options import checked_options, parse_bool, parse_side, positive_int, side_mark
from graymq.protocol.errors import ConfigError
from graymq.protocol.names import check_topic_name

DEFAULT_PRODUCER_GROUP = "SPARK_SINK"
BATCH_MAX_MESSAGES = 256
BATCH_MAX_BYTES = 1 << 20
# Spark's own options that reach the sink: the query's checkpoint (streaming) and the save path (unused).
_SPARK = {"checkpointlocation", "path"}
_KNOWN = {"nameserver", "token", "topic", "grayflag", "lane", "producergroup", "batchmaxmessages", "batchmaxbytes",
          "sendtimeoutms", "retrytimes", "writeid", "registerproducer", *_SPARK}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a ``graymq`` write needs; picklable, so it travels with the writer to the executors.

    nameserver        name server URL(s), comma-separated (required)
    topic             the target topic, unless the rows carry a ``topic`` column (which then wins)
    grayFlag          true: write to the gray queues; false (default): the normal ones
                      (or the Spark conf ``spark.graymq.grayFlag``, read with ``with_conf_gray_flag``)
    lane              write to the queues of this lane's slot (docs/lanes.md; its first write takes a slot);
                      ``gray`` is ``grayFlag=true``; refused with ``grayFlag=false`` (or the conf
                      ``spark.graymq.lane``); empty: none
    producerGroup     the producer group the writing tasks report as (default ``SPARK_SINK``)
    batchMaxMessages  messages per send request (default 256) ...
    batchMaxBytes     ... or body bytes (default 1 MiB), whichever comes first
    sendTimeoutMs     one request's budget, retries included (default 3000)
    retryTimes        retries of a request whose outcome is unknown, to the same queue (default 2)
    writeId           batch writes: the identity of this write (default: a new one per ``save()``); the same
                      id given to a re-run of the same write makes the brokers recognise its rows
    registerProducer  true (default): each task's producer registers in ``producerGroup`` while it sends (a batch
                      write, or a streaming write outside a ``StreamingJob``); false: the tasks only send, on the
                      side of ``grayFlag`` — a ``StreamingJob`` given the producer group sets it, as it reports for
                      them once, as one producer of the group, and decides the side on the driver
    token             the principal's token (default: GRAYMQ_TOKEN where the task runs)
    """

    nameserver: str
    topic: str | None = None
    gray: bool = False
    lane: str | None = None  # with ``gray``: the lane (None: ``gray``)
    producer_group: str = DEFAULT_PRODUCER_GROUP
    batch_max_messages: int = BATCH_MAX_MESSAGES
    batch_max_bytes: int = BATCH_MAX_BYTES
    send_timeout_s: float = 3.0
    retry_times: int = 2
    write_id: str | None = None
    register_producer: bool = True
    token: str | None = field(default=None, repr=False)

    @property
    def side(self) -> bool | str:
        """The side of the writes: False base, True the ``gray`` lane, else the lane's name."""
        return side_mark(self.gray, self.lane)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        raw, nameserver = checked_options(options, _KNOWN, "graymq sink")
        topic = raw.get("topic", "").strip() or None
        if topic is not None and (problem := check_topic_name(topic)):
            raise ConfigError(f"option topic: {problem}: {topic!r}")
        group = raw.get("producergroup", DEFAULT_PRODUCER_GROUP).strip()
        if not group:
            raise ConfigError("option producerGroup must not be empty")
        retry_times = raw.get("retrytimes", "2")
        if not retry_times.isdigit():
            raise ConfigError(f"option retryTimes={retry_times!r} must be an integer >= 0")
        gray, lane = parse_side(raw)
        return cls(
            nameserver=nameserver, topic=topic, gray=gray, lane=lane,
            producer_group=group,
            batch_max_messages=positive_int("batchMaxMessages", raw.get("batchmaxmessages", str(BATCH_MAX_MESSAGES))),
            batch_max_bytes=positive_int("batchMaxBytes", raw.get("batchmaxbytes", str(BATCH_MAX_BYTES))),
            send_timeout_s=positive_int("sendTimeoutMs", raw.get("sendtimeoutms", "3000")) / 1000,
            retry_times=int(retry_times), write_id=raw.get("writeid", "").strip() or None,
            register_producer=parse_bool("registerProducer", raw.get("registerproducer", "true")),
            token=raw.get("token") or None,
        )
