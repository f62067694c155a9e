"""A stock producer's lane mark, read from its message's user properties: ``graymq.lane``, else the ``graymq.lane``
entry of the W3C ``baggage`` property (which OpenTelemetry-instrumented services propagate from message to message).

A mark only asks: the release decides whether it is honoured (``core.gray_side.send_lane``), as for the marks of
graymq's own producers (``Message(lane=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote

from graymq.protocol.constants import PROPERTY_BAGGAGE, PROPERTY_LANE
from graymq.protocol.errors import BadRequestError
from graymq.protocol.names import check_lane_name

BAGGAGE_LANE_KEY = PROPERTY_LANE  # the baggage entry's key is the property's name


def baggage_entry(baggage: str, key: str) -> str | None:
    """The value of ``key``'s first entry in a W3C baggage header (``k=v;prop, k2=v2``: whitespace around each part
    ignored, entry properties dropped, the value percent-decoded), or None.

    >>> baggage_entry("userId=alice, graymq.lane=v3;ttl=30 , region=eu", "graymq.lane")
    'v3'
    >>> baggage_entry("graymq.lane = %76%33", "graymq.lane"), baggage_entry("graymq.lanes=v3", "graymq.lane")
    ('v3', None)
    """
    for member in baggage.split(","):
        name, equals, value = member.split(";", 1)[0].partition("=")
        if equals and name.strip() == key:
            return unquote(value.strip())
    return None


def message_lane_mark(properties: Mapping[str, str]) -> str | None:
    """The lane a message's user properties mark (None: no mark): ``graymq.lane``, else the baggage entry
    ``graymq.lane``. A value that is no lane name is refused (``BadRequestError`` naming where it was found).

    >>> message_lane_mark({"graymq.lane": "v3", "baggage": "graymq.lane=v2"})
    'v3'
    >>> message_lane_mark({"baggage": "tenant=acme,graymq.lane=v2"}), message_lane_mark({"region": "eu"})
    ('v2', None)
    """
    lane: str | None = properties.get(PROPERTY_LANE)
    where = "property"
    if lane is None:
        lane, where = baggage_entry(properties.get(PROPERTY_BAGGAGE, ""), BAGGAGE_LANE_KEY), "baggage entry"
    if lane is None:
        return None
    problem = check_lane_name(lane)
    if problem is not None:
        raise BadRequestError(f"the message's {where} {PROPERTY_LANE!r} does not name a lane: {problem}")
    return lane
