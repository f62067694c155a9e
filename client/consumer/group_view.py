"""The group as the brokers list it, built once per process for each set of listings: after a change of the
group every consumer of it reads the same listings, and a process of a hundred consumers built the same view a
hundred times.

Views listing the same clients the same way (the listings differing in heartbeat times only) are one object, named
by one ``Membership``: what is computed from a view (client/consumer/group_allocation.py) is computed once for it."""

from __future__ import annotations

from collections import OrderedDict

from graymq.core.gray_side import Mark
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol import graymq_pb2 as pb

View = dict[str, tuple[Mark, "frozenset[str] | None"]]
"""client id -> (its side: False base, True the ``gray`` lane, else its lane's name; subscribed topics or None)"""
Membership = frozenset[tuple[str, tuple[Mark, "frozenset[str] | None"]]]
"""A view's entries: equal for equal views; the one of a view is one object, so keys naming it compare by identity"""
Listings = tuple[tuple[str, bytes], ...]  # (broker address, its encoded listing), sorted
Known = tuple[Membership, View]
KEEP = 16  # views of the latest listings kept (a few groups, a change or two in flight)

_views: OrderedDict[Listings, Known] = OrderedDict()
_members: OrderedDict[Membership, Known] = OrderedDict()
# the listing objects the consumers of one request read (held, so their ids are theirs) -> their view
_read: OrderedDict[tuple[tuple[str, int], ...], tuple[list[pb.ConsumerListResponse], Known]] = OrderedDict()


def group_view(listings: dict[str, pb.ConsumerListResponse]) -> Known:
    """(the view's membership, the view): where brokers disagree (a heartbeat in flight) the latest heartbeat wins.

    The view is shared: not to be changed."""
    read = tuple(sorted((address, id(listing)) for address, listing in listings.items()))
    if read in _read:  # the listings another consumer read from the same requests
        _read.move_to_end(read)
        return _read[read][1]
    key = tuple(sorted((address, listing.SerializeToString()) for address, listing in listings.items()))
    known = _views.get(key)
    if known is None:
        known = _views[key] = _intern(_build(listings))
    _views.move_to_end(key)
    _read[read] = list(listings.values()), known
    for table in (_views, _read):
        while len(table) > KEEP:
            table.popitem(last=False)
    return known


def _build(listings: dict[str, pb.ConsumerListResponse]) -> View:
    latest: dict[str, pb.ClientInfo] = {}
    for listing in listings.values():
        for c in listing.clients:
            seen = latest.get(c.client_id)
            if seen is None or c.last_heartbeat_ms > seen.last_heartbeat_ms:
                latest[c.client_id] = c
    return {client_id: (side(c), frozenset(c.topics) or None) for client_id, c in latest.items()}


def _intern(view: View) -> Known:
    """The known view equal to ``view`` (with its membership), else ``view`` made the known one."""
    membership = frozenset(view.items())
    known = _members.get(membership)
    if known is None:
        known = _members[membership] = membership, view
        while len(_members) > KEEP:
            _members.popitem(last=False)
    _members.move_to_end(membership)
    return known


def side(client: pb.ClientInfo) -> Mark:
    """A listed client's side: False base, True the ``gray`` lane, else its lane's name."""
    if not client.gray_flag:
        return False
    return True if client.lane in ("", GRAY_LANE) else client.lane
