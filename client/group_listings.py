"""The group listings a ``ClientInstance``'s consumers read from the brokers, one request per broker and group at a
time: after a change of a group every consumer of it in the process rebalances at once, and each asking every broker
for the same five-hundred-entry listing cost the brokers and the process a request per consumer.

A consumer joins a request in flight only when it began after every "group changed" notice the consumer has seen
(the notices are counted per group): one sent before a notice may list the group as it was. For a periodic
rebalance (``reuse``), a listing that came back less than ``FRESH_S`` ago, asked for after those notices, serves too:
each consumer's periodic rebalance (every 20 s, at a phase of its own) otherwise asked again for the listing its
neighbours had just read — at 5,000 clients the big group's 25 consumers of a process read 500-entry listings from
both brokers two and a half times a second. A rebalance something asked for (a notice, a flip) reads afresh.
"""

from __future__ import annotations

import asyncio
import functools

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient

Fetching = tuple[int, "asyncio.Future[pb.ConsumerListResponse]"]  # (notices counted when it began, the request)
Fetched = tuple[int, float, pb.ConsumerListResponse]  # (notices counted when it began, when it came back, listing)
FRESH_S = 5.0


class GroupListings:
    """``fetch`` reads a group's listing on a broker, sharing the request in flight; ``changed`` counts a notice."""

    def __init__(self, brokers: BrokerClient, fresh_s: float = FRESH_S) -> None:
        self.brokers = brokers
        self.fresh_s = fresh_s
        self._notices: dict[str, int] = {}
        self._fetching: dict[tuple[str, str], Fetching] = {}  # (broker address, group) -> the latest request
        self._fetched: dict[tuple[str, str], Fetched] = {}  # (broker address, group) -> the latest listing read

    def changed(self, group: str) -> None:
        """A broker said ``group`` changed: a listing asked for before may miss the change."""
        self._notices[group] = self._notices.get(group, 0) + 1

    def notices(self, group: str) -> int:
        """How many "group changed" notices of ``group`` the instance heard."""
        return self._notices.get(group, 0)

    async def fetch(self, address: str, group: str, seen: int, *, reuse: bool = False) -> pb.ConsumerListResponse:
        """``group``'s listing on the broker at ``address``: the request in flight when it began at or after the
        ``seen``-th notice of the group, else (``reuse``) the listing such a request read less than ``fresh_s`` ago,
        else a new request's; raises what the request raised."""
        key = (address, group)
        fetching = self._fetching.get(key)
        fetched = self._fetched.get(key)
        if reuse and (fetching is None or fetching[0] < seen) and fetched is not None and fetched[0] >= seen \
                and asyncio.get_running_loop().time() - fetched[1] < self.fresh_s:
            return fetched[2]
        if fetching is None or fetching[0] < seen:
            request = asyncio.ensure_future(self.brokers.consumer_list(address, group))
            fetching = self._fetching[key] = (self.notices(group), request)
            request.add_done_callback(functools.partial(self._done, key, fetching))
        return await asyncio.shield(fetching[1])  # a consumer stopping does not cancel the others' request

    def _done(self, key: tuple[str, str], fetching: Fetching, request: asyncio.Future[pb.ConsumerListResponse]
              ) -> None:
        if self._fetching.get(key) is fetching:
            del self._fetching[key]
        if not request.cancelled() and request.exception() is None:  # retrieved: its waiters may all have stopped
            latest = self._fetched.get(key)
            if latest is None or latest[0] <= fetching[0]:
                self._fetched[key] = (fetching[0], asyncio.get_running_loop().time(), request.result())
