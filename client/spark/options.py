"""Options of the ``graymq`` source, validated once on the driver, and the Spark-conf switch for the job's side.

Spark hands a data source its options case-insensitively (``dict(options)`` lower-cases the
keys), so every name here is matched in lower case. A bad value is a ``ConfigError`` naming
the option; an unknown option is refused so a typo cannot silently fall back to a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from graymq.core.gray_side import mark_lane
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.client import parse_urls
from graymq.protocol.errors import ConfigError
from graymq.protocol.names import check_lane_name, check_topic_name

GRAY_FLAG_CONF = "spark.graymq.grayFlag"
LANE_CONF = "spark.graymq.lane"
STARTING_OFFSETS = ("group", "earliest", "latest")
MAX_PULL_BATCH = 1024
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
_KNOWN = {"nameserver", "token", "topic", "topics", "group", "grayflag", "lane", "expression",
          "maxrecordspertrigger", "startingoffsets", "pullbatchsize"}


def parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"option {name}={value!r} is not a boolean (true/false)")


def positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"option {name}={value!r} is not an integer") from None
    if number <= 0:
        raise ConfigError(f"option {name}={value!r} must be > 0")
    return number


def parse_side(raw: Mapping[str, str]) -> tuple[bool, str | None]:
    """(gray, lane) of lower-cased options: ``lane`` names the job's lane (``gray`` is today's gray side, as
    ``grayFlag=true``; empty: none), ``grayFlag`` alone says gray or base. A lane is refused with ``grayFlag=false``
    (a job in a lane is not base) and when its name breaks the name rule; ``lane`` is None for base and ``gray``.

    >>> parse_side({"lane": "v3"}), parse_side({"grayflag": "true", "lane": "gray"}), parse_side({})
    ((True, 'v3'), (True, None), (False, None))
    """
    gray = parse_bool("grayFlag", raw["grayflag"]) if "grayflag" in raw else None
    lane = raw.get("lane", "").strip()
    if not lane:
        return bool(gray), None
    if problem := check_lane_name(lane):
        raise ConfigError(f"option lane: {problem}")
    if gray is False:
        raise ConfigError(f"options grayFlag=false and lane={lane!r} contradict each other: a job in a lane is not "
                          "base (drop grayFlag, or the lane)")
    return True, None if lane == GRAY_LANE else lane


def side_mark(gray: bool, lane: str | None) -> bool | str:
    """The side as ``gray_side.Mark`` gives it: False base, True the ``gray`` lane, else the lane's name (``lane``:
    with ``gray``, None or ``gray`` for the ``gray`` lane).

    >>> side_mark(True, None), side_mark(True, "gray"), side_mark(True, "v3"), side_mark(False, None)
    (True, True, 'v3', False)
    """
    if not gray:
        return False
    return True if lane in (None, GRAY_LANE) else str(lane)


def side_options(side: bool | str | None) -> dict[str, str]:
    """The ``grayFlag`` and ``lane`` options of a side (False/None base, True the ``gray`` lane, else a lane's name),
    replacing whatever side a read's or write's options named.

    >>> side_options("v3"), side_options(False)
    ({'grayFlag': 'true', 'lane': 'v3'}, {'grayFlag': 'false', 'lane': ''})
    """
    lane = mark_lane(side)
    return {"grayFlag": str(lane is not None).lower(), "lane": lane or ""}


def checked_options(options: Mapping[str, str], known: set[str], what: str) -> tuple[dict[str, str], str]:
    """The options under lower-case names and the name server URL(s); ``ConfigError`` on an unknown option
    (``what``: "graymq" or "graymq sink", for the message) or a missing or malformed name server."""
    raw = {key.lower(): str(value) for key, value in options.items()}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown {what} option(s): {', '.join(unknown)}")
    nameserver = raw.get("nameserver", "")
    if not nameserver.strip():
        raise ConfigError("option nameserver is required (name server URL, e.g. http://127.0.0.1:9876)")
    parse_urls(nameserver)
    return raw, nameserver


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a ``graymq`` read needs; picklable, so it travels with the reader to the executors.

    nameserver            name server URL(s), comma-separated (required)
    topic / topics        one topic, or several comma-separated (required)
    group                 the consumer group the job belongs to (required)
    grayFlag              true: read the gray queues (lane ``gray``); false (default): the normal queues
    lane                  the job's lane (docs/lanes.md): read the queues of the slot it holds; ``gray`` is
                          ``grayFlag=true``; refused with ``grayFlag=false``. A base job (no lane) reads the base
                          queues and adopts a lane's as a base consumer of the group would
    expression            tag expression, ``*`` (default) or ``TagA||TagB``
    maxRecordsPerTrigger  streaming: at most this many offsets per micro-batch, spread over the queues
    startingOffsets       ``group`` (default: the group's committed offset, earliest where none),
                          ``earliest`` or ``latest``; a restarted stream uses its checkpoint instead
    pullBatchSize         messages per pull request (default and most 1024; the broker caps a reply at 4 MiB)
    token                 the principal's token (default: GRAYMQ_TOKEN where the reader runs)
    """

    nameserver: str
    topics: tuple[str, ...]
    group: str
    gray: bool = False
    lane: str | None = None  # with ``gray``: the lane (None: ``gray``)
    expression: str = "*"
    max_records_per_trigger: int | None = None
    starting_offsets: str = "group"
    pull_batch_size: int = MAX_PULL_BATCH
    token: str | None = field(default=None, repr=False)

    @property
    def in_lane(self) -> str | None:
        """The lane the job reads (``gray`` for a gray job); None for base."""
        return (self.lane or GRAY_LANE) if self.gray else None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        raw, nameserver = checked_options(options, _KNOWN, "graymq")
        topics = tuple(t.strip() for t in (raw.get("topics") or raw.get("topic") or "").split(",") if t.strip())
        if not topics:
            raise ConfigError("option topic (or topics, comma-separated) is required")
        for topic in topics:
            problem = check_topic_name(topic)
            if problem:
                raise ConfigError(f"option topic: {problem}: {topic!r}")
        group = raw.get("group", "").strip()
        if not group:
            raise ConfigError("option group is required (the consumer group of the job)")
        starting = raw.get("startingoffsets", "group").strip().lower()
        if starting not in STARTING_OFFSETS:
            raise ConfigError(f"option startingOffsets={starting!r} must be one of {', '.join(STARTING_OFFSETS)}")
        limit = raw.get("maxrecordspertrigger")
        batch = positive_int("pullBatchSize", raw.get("pullbatchsize", str(MAX_PULL_BATCH)))
        if batch > MAX_PULL_BATCH:
            raise ConfigError(f"option pullBatchSize={batch} exceeds {MAX_PULL_BATCH}")
        gray, lane = parse_side(raw)
        return cls(
            nameserver=nameserver, topics=topics, group=group, gray=gray, lane=lane,
            expression=raw.get("expression", "*").strip() or "*",
            max_records_per_trigger=positive_int("maxRecordsPerTrigger", limit) if limit is not None else None,
            starting_offsets=starting, pull_batch_size=batch, token=raw.get("token") or None,
        )


def with_conf_gray_flag(spark: Any, options: Mapping[str, str]) -> dict[str, str]:
    """``options`` plus ``grayFlag`` and ``lane`` from the Spark conf (``spark.graymq.grayFlag``,
    ``spark.graymq.lane``) when the options name no side (neither ``grayFlag`` nor ``lane``): the options' side wins
    whole. The two are checked together by ``parse_side`` (a conf lane with a conf ``grayFlag`` false is refused).

    Run on the driver: the conf is not visible to the reader, options are its only input.
    """
    result = dict(options)
    if any(key.lower() in ("grayflag", "lane") for key in result):
        return result
    gray, lane = spark.conf.get(GRAY_FLAG_CONF, None), spark.conf.get(LANE_CONF, None)
    if gray is not None:
        result["grayFlag"] = str(parse_bool(GRAY_FLAG_CONF, gray)).lower()
    if lane is not None and lane.strip():
        result["lane"] = lane.strip()
    return result
