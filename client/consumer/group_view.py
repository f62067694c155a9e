"""The group as the brokers list it, built once per process for each set of listings: after a change of the
group every consumer of it reads the same listings, and a process of a hundred consumers built the same view a
hundred times."""

from __future__ import annotations

from collections import OrderedDict

from graymq.core.gray_side import Mark
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol import graymq_pb2 as pb

View = dict[str, tuple[Mark, "set[str] | None"]]
"""client id -> (its side: False base, True the ``gray`` lane, else its lane's name; subscribed topics or None)"""
Listings = tuple[tuple[str, bytes], ...]  # (broker address, its encoded listing), sorted
KEEP = 16  # views of the latest listings kept (a few groups, a change or two in flight)

_views: OrderedDict[Listings, tuple[Listings, View]] = OrderedDict()  # the key kept: later keys compare by identity


def group_view(listings: dict[str, pb.ConsumerListResponse]) -> tuple[Listings, View]:
    """(the listings' key, the view): where brokers disagree (a heartbeat in flight) the latest heartbeat wins.

    The view is shared: not to be changed."""
    key = tuple(sorted((address, listing.SerializeToString()) for address, listing in listings.items()))
    known = _views.get(key)
    if known is not None:
        _views.move_to_end(key)
        return known
    latest: dict[str, pb.ClientInfo] = {}
    for listing in listings.values():
        for c in listing.clients:
            seen = latest.get(c.client_id)
            if seen is None or c.last_heartbeat_ms > seen.last_heartbeat_ms:
                latest[c.client_id] = c
    view = {client_id: (side(c), set(c.topics) or None) for client_id, c in latest.items()}
    _views[key] = key, view
    while len(_views) > KEEP:
        _views.popitem(last=False)
    return key, view


def side(client: pb.ClientInfo) -> Mark:
    """A listed client's side: False base, True the ``gray`` lane, else its lane's name."""
    if not client.gray_flag:
        return False
    return True if client.lane in ("", GRAY_LANE) else client.lane
