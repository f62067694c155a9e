"""What a producer may put in a message's properties: limits (count, name size, value size, total) and the
reserved names the broker owns, checked once per message on every send path (the broker port's SEND_MESSAGE and
SEND_BATCH, the gRPC endpoint's SendMessage).

Sizes are UTF-8 bytes. The message's tag and each of its keys count as values and towards the total: they are
stored as properties too. Defaults follow RocketMQ's (128 user properties; a properties section within a
signed 16-bit length, about 32 KiB), the broker settings ``max_properties``, ``max_property_name_size``,
``max_property_value_size`` and ``max_properties_size`` (``GRAYMQ_BROKER_*``) change them.

Reserved names a producer does not set (``STRIPPED_PROPERTIES`` and ``REFUSED_PROPERTIES`` in
``protocol/constants.py``, where the compiled twin reads them too):

- **stripped** (dropped, the message kept): ``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``TRACE_ID``, ``PGROUP``, ``PSEQ``
  — the broker sets them from the message's own fields and the request; ``RETRY_TOPIC``, ``REAL_TOPIC``,
  ``REAL_QID`` — routing state of the broker's retry and schedule services, meaningful only as the broker wrote
  them. A consumer forwarding a message it received carries copies of these; stripping keeps that working while
  nothing the producer wrote is trusted.
- **refused**: ``DELAY`` and ``__STARTDELIVERTIME`` (RocketMQ 4's delay level and timed-delivery properties): a
  producer setting one asks for a delay the property does not give here, and stripping would deliver the message
  at once, silently. The gRPC endpoint also refuses a stock producer's ``__SHARDINGKEY``, which graymq sets from
  the message's ``message_group`` (broker_ext/grpc_endpoint/send.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graymq.protocol.constants import REFUSED_PROPERTIES, STRIPPED_PROPERTIES
from graymq.protocol.errors import IllegalPropertyError, PropertiesTooLargeError
from graymq.protocol.native import pick

NAME_SHOWN = 40  # characters of an over-long property name a refusal quotes


@dataclass(frozen=True, slots=True)
class PropertyLimits:
    """Bounds of one message's properties (sizes in UTF-8 bytes; the tag and keys count as values)."""

    count: int = 128
    name_size: int = 1024
    value_size: int = 16 * 1024
    total_size: int = 32 * 1024


def utf8_size(text: str) -> int:
    """``len(text.encode())`` without encoding an ASCII string (the usual case)."""
    return len(text) if text.isascii() else len(text.encode())


def own_properties_py(own: Mapping[str, str], tags: str, keys: Sequence[str], limits: PropertyLimits
                      ) -> dict[str, str]:
    """A copy of the producer's properties ``own`` without the stripped reserved names, once ``own``, ``tags``
    and ``keys`` are within ``limits``; ``PropertiesTooLargeError`` or ``IllegalPropertyError`` (one line naming
    the property and the limit) otherwise. The reference of the compiled ``own_properties``."""
    count, name_size, value_size = limits.count, limits.name_size, limits.value_size
    total = utf8_size(tags)
    if total > value_size:
        raise _value_too_large("the tag", total, value_size)
    for index in range(len(keys)):  # by index: iterating a protobuf repeated field costs ~0.5 us more
        size = utf8_size(keys[index])
        if size > value_size:
            raise _value_too_large("a message key", size, value_size)
        total += size
    if not own:  # the common case: no map to iterate (as costly as a key's loop)
        if total > limits.total_size:
            raise _too_large_in_total(total, limits.total_size)
        return {}
    if len(own) > count:
        raise PropertiesTooLargeError(f"the message has {len(own)} properties, more than the {count} allowed "
                                      "(max_properties)")
    properties = {}
    for name, value in own.items():
        size = utf8_size(name)
        if not 0 < size <= name_size:
            raise IllegalPropertyError(f"a property name of {size} bytes ({name[:NAME_SHOWN]!r}), not 1 to "
                                       f"{name_size} (max_property_name_size)")
        total += size
        size = utf8_size(value)
        if size > value_size:
            raise _value_too_large(f"property {name[:NAME_SHOWN]!r} has a value", size, value_size)
        total += size
        if name in STRIPPED_PROPERTIES:
            continue
        if name in REFUSED_PROPERTIES:
            raise IllegalPropertyError(f"property {name!r} is reserved: {REFUSED_PROPERTIES[name]}")
        properties[name] = value
    if total > limits.total_size:
        raise _too_large_in_total(total, limits.total_size)
    return properties


def _value_too_large(what: str, size: int, limit: int) -> PropertiesTooLargeError:
    return PropertiesTooLargeError(f"{what} of {size} bytes, more than the {limit} allowed (max_property_value_size)")


def _too_large_in_total(total: int, limit: int) -> PropertiesTooLargeError:
    return PropertiesTooLargeError(f"the message's properties, tag and keys have {total} bytes, more than the "
                                   f"{limit} allowed (max_properties_size)")


own_properties = pick("own_properties", own_properties_py)
