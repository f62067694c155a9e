"""``graymq gray status GROUP --wait-for N``: wait until N consumers or Spark jobs of the group hold queues, the
wait a script (or a README block pasted whole) needs between starting its consumers in the background and sending
to them or promoting them."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

from graymq.protocol.errors import GrayMQError

if TYPE_CHECKING:
    from graymq.nameserver_api.client import NameServerClient

DEFAULT_MEMBERS_WAIT_S = 120.0  # a Spark job's JVM on a loaded machine takes about a minute and a half to start
POLL_S = 0.5
CONSUMING_ROLES = ("consumer", "spark")


async def members_hold_queues(ns: NameServerClient, group: str, members: int, timeout_s: float) -> None:
    """Return once ``members`` live consumers or Spark jobs of ``group`` report holding queues; a GrayMQError
    naming how many do after ``timeout_s``."""
    from graymq.nameserver_api.client import NotFoundError

    if members < 1:
        raise GrayMQError("--wait-for must be 1 or more")
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        try:
            clients = (await ns.group_clients(group)).clients
        except NotFoundError:  # no client has registered yet: the group does not exist yet
            clients = []
        holding = [c for c in clients if c.role in CONSUMING_ROLES and c.queues and not c.stale]
        if len(holding) >= members:
            return
        if time.monotonic() >= deadline:
            raise GrayMQError(f"{len(holding)} of the {members} consumer(s) of {group} awaited hold queues after "
                              f"{timeout_s:g} s: are they running (see their output)? --wait-timeout waits longer")
        if not said:
            print(f"waiting for {members} consumer(s) of {group} to hold queues (up to {timeout_s:g} s)",
                  file=sys.stderr, flush=True)
            said = True
        await asyncio.sleep(POLL_S)
