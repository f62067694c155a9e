"""Rights of a principal and the patterns they name.

A pattern is a glob over names, matched case-sensitively: ``*`` stands for any run of characters
(also none), ``?`` for one; every other character stands for itself and must be allowed in a name
(``a-z A-Z 0-9 % - _ |``). ``ORDER_*`` covers ``ORDER_PAID`` and ``ORDER_``; ``*`` covers every name.
A consume right is ``GROUP_PATTERN`` (any topic) or ``GROUP_PATTERN:TOPIC_PATTERN``. An admin holds
every right; a broker may register and read the topic table, nothing else, and only as the broker names its
broker rights cover: ``NAME_PATTERN`` (any replica id) or ``NAME_PATTERN:REPLICA_ID_PATTERN`` (``broker-b:1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from graymq.protocol.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from graymq.protocol.names import NAME_CHARACTERS, NAME_MAX_LENGTH

PATTERN_CHARACTERS = NAME_CHARACTERS | frozenset("*?")
PATTERN_RULE = f"1 to {NAME_MAX_LENGTH} characters from a-z A-Z 0-9 % - _ | and the wildcards * ?"


def check_pattern(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid name pattern, or ``None``.

    >>> check_pattern("ORDER_*") is None
    True
    >>> check_pattern("a.b")
    "invalid pattern 'a.b': '.' is not allowed (1 to 127 characters from a-z A-Z 0-9 % - _ | and the wildcards * ?)"
    """
    if not pattern:
        problem = "it is empty"
    elif len(pattern) > NAME_MAX_LENGTH:
        problem = f"it has {len(pattern)} characters"
    elif bad := set(pattern) - PATTERN_CHARACTERS:
        problem = ", ".join(repr(c) for c in sorted(bad)) + (" is" if len(bad) == 1 else " are") + " not allowed"
    else:
        return None
    return f"invalid pattern {pattern!r}: {problem} ({PATTERN_RULE})"


def check_consume_right(right: str) -> str | None:
    """Why ``right`` (``GROUP_PATTERN`` or ``GROUP_PATTERN:TOPIC_PATTERN``) is not valid, or ``None``."""
    group, _, topic = right.partition(":")
    return check_pattern(group) or (check_pattern(topic) if ":" in right else None)


def check_broker_right(right: str) -> str | None:
    """Why ``right`` (``NAME_PATTERN`` or ``NAME_PATTERN:REPLICA_ID_PATTERN``) is not valid, or ``None``.

    >>> check_broker_right("broker-b:1") is None, check_broker_right("broker-*") is None
    (True, True)
    >>> check_broker_right("broker-b:x")
    "invalid replica id pattern 'x' in 'broker-b:x': digits and the wildcards * ? only"
    """
    name, sep, replica = right.partition(":")
    if problem := check_pattern(name):
        return problem
    if sep and (not replica or set(replica) - set("0123456789*?")):
        return f"invalid replica id pattern {replica!r} in {right!r}: digits and the wildcards * ? only"
    return None


@dataclass(frozen=True)
class BrokerRight:
    name: str
    replica: str = "*"

    @classmethod
    def parse(cls, right: str) -> BrokerRight:
        name, sep, replica = right.partition(":")
        return cls(name, replica if sep else "*")

    def covers(self, broker_name: str, replica_id: int | None) -> bool:
        """A registration without a replica id (a broker of one) needs a right on every replica id."""
        if not fnmatchcase(broker_name, self.name):
            return False
        return self.replica == "*" if replica_id is None else fnmatchcase(str(replica_id), self.replica)


ANY_BROKER = (BrokerRight("*"),)


@dataclass(frozen=True)
class ConsumeRight:
    group: str
    topic: str = "*"

    @classmethod
    def parse(cls, right: str) -> ConsumeRight:
        group, sep, topic = right.partition(":")
        return cls(group, topic if sep else "*")


@dataclass(frozen=True)
class Rights:
    """What a principal may do.

    >>> r = Rights(produce=("ORDER_*",), consume=(ConsumeRight.parse("billing:ORDER_*"),))
    >>> r.may_produce("ORDER_PAID"), r.may_produce("USER"), r.may_consume("billing", "ORDER_PAID")
    (True, False, True)
    >>> r.may_consume("billing", "USER"), r.may_consume("billing"), r.may_use_group("billing")
    (False, True, True)
    """

    produce: tuple[str, ...] = ()
    consume: tuple[ConsumeRight, ...] = field(default=())
    admin: bool = False
    broker: bool = False
    brokers: tuple[BrokerRight, ...] = field(default=())  # with ``broker``: the broker names it may act as

    @classmethod
    def of(cls, produce: list[str], consume: list[str], admin: bool, broker: bool,
           broker_names: list[str] | tuple[str, ...] = ()) -> Rights:
        """Rights from their stored form (consume rights as ``GROUP_PATTERN[:TOPIC_PATTERN]`` strings, broker
        rights as ``NAME_PATTERN[:REPLICA_ID_PATTERN]``)."""
        return cls(tuple(produce), tuple(ConsumeRight.parse(c) for c in consume), admin, broker,
                   tuple(BrokerRight.parse(b) for b in broker_names))

    def may_act_as_broker(self, broker_name: str, replica_id: int | None = None) -> bool:
        """Register as, or copy the log of, broker ``broker_name`` (replica ``replica_id``; ``None``: no replicas).

        >>> r = Rights.of([], [], False, True, ["broker-b:1"])
        >>> r.may_act_as_broker("broker-b", 1), r.may_act_as_broker("broker-b", 0), r.may_act_as_broker("broker-b")
        (True, False, False)
        """
        return self.admin or (self.broker and any(b.covers(broker_name, replica_id) for b in self.brokers))

    def may_produce(self, topic: str) -> bool:
        return self.admin or any(fnmatchcase(topic, p) for p in self.produce)

    def may_consume(self, group: str, topic: str | None = None) -> bool:
        """``topic`` ``None``: the group on at least one topic."""
        return self.admin or any(
            fnmatchcase(group, r.group) and (topic is None or fnmatchcase(topic, r.topic)) for r in self.consume
        )

    def may_consume_topic(self, group: str, topic: str) -> bool:
        """Consume ``topic`` in ``group``; the group's own retry and dead-letter topics come with the group."""
        if topic in (RETRY_GROUP_TOPIC_PREFIX + group, DLQ_GROUP_TOPIC_PREFIX + group):
            return self.may_consume(group)
        return self.may_consume(group, topic)

    def may_read_topic(self, topic: str) -> bool:
        """Read messages of ``topic`` outside a group (by key, by offset): some consume right covers it."""
        group = group_of_topic(topic)
        if group is not None and self.may_consume(group):
            return True
        return self.admin or any(fnmatchcase(topic, r.topic) for r in self.consume)

    def may_use_group(self, group: str) -> bool:
        """A client of ``group``: a consumer of it, or a producer (a producer group is not restricted)."""
        return self.admin or bool(self.produce) or self.may_consume(group)

    def may_use_topic(self, topic: str) -> bool:
        """Look up the route of ``topic``: to produce to it, or to consume it in some group."""
        return self.may_produce(topic) or self.may_read_topic(topic)


def group_of_topic(topic: str) -> str | None:
    """The group whose retry or dead-letter topic ``topic`` is, or ``None``."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return topic.removeprefix(prefix)
    return None


ALL_RIGHTS = Rights(admin=True, broker=True, brokers=ANY_BROKER)
