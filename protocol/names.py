"""The rule every name must follow, in one place: broker, name server, clients and the CLI check with it.

Topics, groups (consumer and producer), broker and principal names follow RocketMQ's rule: 1 to
127 characters from ``a-z A-Z 0-9 % - _ |``. Client ids are freer (the default one is
``host@pid@consumer-xxxx``) but travel in URL paths: 1 to 255 characters, no whitespace, no
control character, no ``/``. Label keys are 1 to 63 characters from ``a-z A-Z 0-9 . _ - /``;
label values 0 to 255 characters with no control character.
Each ``check_*`` returns why a name breaks its rule, or ``None`` when it is valid.
"""

from __future__ import annotations

import functools
import string

NAME_MAX_LENGTH = 127
NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "%-_|")
NAME_RULE = f"1 to {NAME_MAX_LENGTH} characters from a-z A-Z 0-9 % - _ |"

CLIENT_ID_MAX_LENGTH = 255
CLIENT_ID_RULE = f"1 to {CLIENT_ID_MAX_LENGTH} characters, no whitespace, no control character, no '/'"

LABEL_KEY_MAX_LENGTH = 63
LABEL_KEY_CHARACTERS = frozenset(string.ascii_letters + string.digits + "._-/")
LABEL_KEY_RULE = f"1 to {LABEL_KEY_MAX_LENGTH} characters from a-z A-Z 0-9 . _ - /"
LABEL_VALUE_MAX_LENGTH = 255
LABEL_VALUE_RULE = f"0 to {LABEL_VALUE_MAX_LENGTH} characters, no control character"

BASE_LANE = "base"
"""The ``lane`` label of what is in no lane (base), in metrics and tables; reserved, no lane may be named so."""


def _describe(chars: set[str]) -> str:
    shown = ", ".join(repr(c) for c in sorted(chars))
    return f"{shown} {'is' if len(chars) == 1 else 'are'} not allowed"


@functools.lru_cache(maxsize=4096)  # a name server checks the same few group and lane names in every heartbeat
def _problem(kind: str, name: str) -> str | None:
    if not name:
        problem = "it is empty"
    elif len(name) > NAME_MAX_LENGTH:
        problem = f"it has {len(name)} characters"
    elif bad := set(name) - NAME_CHARACTERS:
        problem = _describe(bad)
    else:
        return None
    return f"invalid {kind} name {name!r}: {problem} ({NAME_RULE})"


def check_topic_name(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name, or ``None``.

    >>> check_topic_name("TOPIC_ORDER") is None
    True
    >>> check_topic_name("a b")
    "invalid topic name 'a b': ' ' is not allowed (1 to 127 characters from a-z A-Z 0-9 % - _ |)"
    """
    return _problem("topic", topic)


def check_group_name(group: str) -> str | None:
    """Why ``group`` is not a valid consumer or producer group name, or ``None``."""
    return _problem("group", group)


def check_broker_name(broker: str) -> str | None:
    """Why ``broker`` is not a valid broker name, or ``None``."""
    return _problem("broker", broker)


def check_lane_name(lane: str) -> str | None:
    """Why ``lane`` is not a valid lane name (a release track, see docs/lanes.md), or ``None``. ``base`` names the
    side without a lane (the ``lane`` label of metrics), so no lane may take it.

    >>> check_lane_name("v3") is None
    True
    >>> check_lane_name("base")
    "invalid lane name 'base': it names the side without a lane"
    """
    if lane == BASE_LANE:
        return f"invalid lane name {lane!r}: it names the side without a lane"
    return _problem("lane", lane)


def check_principal_name(principal: str) -> str | None:
    """Why ``principal`` is not a valid principal name, or ``None``."""
    return _problem("principal", principal)


def check_label_key(key: str) -> str | None:
    """Why ``key`` is not a valid label key, or ``None``.

    >>> check_label_key("app.kubernetes.io/version") is None
    True
    """
    if not key:
        problem = "it is empty"
    elif len(key) > LABEL_KEY_MAX_LENGTH:
        problem = f"it has {len(key)} characters"
    elif bad := set(key) - LABEL_KEY_CHARACTERS:
        problem = _describe(bad)
    else:
        return None
    return f"invalid label key {key!r}: {problem} ({LABEL_KEY_RULE})"


def check_label_value(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or ``None``."""
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        problem = f"it has {len(value)} characters"
    elif bad := {c for c in value if not c.isprintable()}:
        problem = _describe(bad)
    else:
        return None
    return f"invalid label value {value!r}: {problem} ({LABEL_VALUE_RULE})"


def check_client_id(client_id: str) -> str | None:
    """Why ``client_id`` is not a valid client id, or ``None``.

    >>> check_client_id("host-1@42@consumer-ab12") is None
    True
    """
    if not client_id:
        problem = "it is empty"
    elif len(client_id) > CLIENT_ID_MAX_LENGTH:
        problem = f"it has {len(client_id)} characters"
    elif bad := {c for c in client_id if c == "/" or c.isspace() or not c.isprintable()}:
        problem = _describe(bad)
    else:
        return None
    return f"invalid client id {client_id!r}: {problem} ({CLIENT_ID_RULE})"
