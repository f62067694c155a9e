"""The rule every name must follow, in one place: broker, name server, clients and the CLI check with it.

Topics and groups (consumer and producer) follow RocketMQ's rule: 1 to 127 characters from
``a-z A-Z 0-9 % - _ |``. Client ids are freer (the default one is ``host@pid@consumer-xxxx``)
but travel in URL paths: 1 to 255 characters, no whitespace, no control character, no ``/``.
Each ``check_*`` returns why a name breaks its rule, or ``None`` when it is valid.
"""

from __future__ import annotations

import string

NAME_MAX_LENGTH = 127
NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "%-_|")
NAME_RULE = f"1 to {NAME_MAX_LENGTH} characters from a-z A-Z 0-9 % - _ |"

CLIENT_ID_MAX_LENGTH = 255
CLIENT_ID_RULE = f"1 to {CLIENT_ID_MAX_LENGTH} characters, no whitespace, no control character, no '/'"


def _describe(chars: set[str]) -> str:
    shown = ", ".join(repr(c) for c in sorted(chars))
    return f"{shown} {'is' if len(chars) == 1 else 'are'} not allowed"


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
