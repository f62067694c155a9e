"""The group as the brokers list it, built once per process for each set of listings: after a change of the
group every consumer of it reads the same listings, and a process of a hundred consumers built the same view a
hundred times.

Views listing the same clients the same way (the listings differing in heartbeat times only) are one object, named
by one ``Membership``: what is computed from a view (client/consumer/group_allocation.py) is computed once for it."""

from __future__ import annotations

from graymq.client.lru import Lru
from graymq.core.gray_side import Mark
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol import graymq_pb2 as pb

View = dict[str, tuple[Mark, "frozenset[str] | None"]]
"""client id -> (its side: False base, True the ``gray`` lane, else its lane's name; subscribed topics or None)"""
Membership = frozenset[tuple[str, tuple[Mark, "frozenset[str] | None"]]]
"""A view's entries: equal for equal views; the one of a view is one object, so keys naming it compare by identity"""
Listings = tuple[tuple[str, bytes], ...]  # (broker address, its encoded listing), sorted
Known = tuple[Membership, View]
Read = tuple[tuple[str, int], ...]  # the ids of the listing objects the consumers of one request read, by broker
KEEP = 4  # views of a group kept (its latest listings, a change or two in flight)
GROUPS = 4096  # groups whose views are kept, the least recently read dropped first


class _GroupViews:
    """One group's known views: by its listings' bytes, by their membership, and by the listing objects read (held,
    so that their ids stay theirs). Per group: a process consuming fifty groups shared sixteen entries between
    them, and each consumer's rebalance built its group's view again (a seventh of a fleet worker's time)."""

    def __init__(self) -> None:
        self.views: Lru[Listings, Known] = Lru(KEEP)
        self.members: Lru[Membership, Known] = Lru(KEEP)
        self.read: Lru[Read, tuple[list[pb.ConsumerListResponse], Known]] = Lru(KEEP)


_groups: Lru[str, _GroupViews] = Lru(GROUPS)


def group_view(group: str, listings: dict[str, pb.ConsumerListResponse]) -> Known:
    """(the view's membership, the view) of ``group``: where brokers disagree (a heartbeat in flight) the latest
    heartbeat wins.

    The view is shared: not to be changed."""
    known_views = _groups.setdefault(group, _GroupViews)
    read = tuple(sorted((address, id(listing)) for address, listing in listings.items()))
    if (shared := known_views.read.get(read)) is not None:  # the listings another consumer read from the same requests
        return shared[1]
    key = tuple(sorted((address, listing.SerializeToString()) for address, listing in listings.items()))
    known = known_views.views.get(key)
    if known is None:
        known = known_views.views.put(key, _intern(known_views.members, _build(listings)))
    known_views.read.put(read, (list(listings.values()), known))
    return known


def _build(listings: dict[str, pb.ConsumerListResponse]) -> View:
    latest: dict[str, pb.ClientInfo] = {}
    for listing in listings.values():
        for c in listing.clients:
            seen = latest.get(c.client_id)
            if seen is None or c.last_heartbeat_ms > seen.last_heartbeat_ms:
                latest[c.client_id] = c
    return {client_id: (side(c), frozenset(c.topics) or None) for client_id, c in latest.items()}


def _intern(members: Lru[Membership, Known], view: View) -> Known:
    """The known view equal to ``view`` (with its membership), else ``view`` made the known one."""
    membership = frozenset(view.items())
    known = members.get(membership)
    return members.put(membership, (membership, view)) if known is None else known


def side(client: pb.ClientInfo) -> Mark:
    """A listed client's side: False base, True the ``gray`` lane, else its lane's name."""
    if not client.gray_flag:
        return False
    return True if client.lane in ("", GRAY_LANE) else client.lane
