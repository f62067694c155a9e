"""The broker's on-demand read of the principals (an unknown token): callers share one read, reads are at least
``min_interval_s`` apart, and a caller never settles for a read that began before it asked (no network)."""

from __future__ import annotations

import asyncio
import time

import pytest

from graymq.broker_ext.security.principal_refresh import PrincipalRefresh

pytestmark = pytest.mark.unit


class SlowRead:
    """A read that records when it began and takes ``duration_s``."""

    def __init__(self, duration_s: float = 0.0) -> None:
        self.duration_s = duration_s
        self.began: list[float] = []

    async def __call__(self) -> bool:
        self.began.append(time.monotonic())
        await asyncio.sleep(self.duration_s)
        return True


def test_callers_at_once_share_one_read_and_reads_keep_the_interval() -> None:
    read = SlowRead()

    async def main() -> None:
        refresh = PrincipalRefresh(read, min_interval_s=0.3)
        await asyncio.gather(*(refresh() for _ in range(50)))
        assert len(read.began) == 1
        await asyncio.gather(*(refresh() for _ in range(50)))  # right after: waits for the interval, one read
        assert len(read.began) == 2 and read.began[1] - read.began[0] >= 0.3
        await refresh.stop()

    asyncio.run(main())


def test_a_caller_arriving_during_a_read_waits_for_the_next_one() -> None:
    read = SlowRead(duration_s=0.2)

    async def main() -> None:
        refresh = PrincipalRefresh(read, min_interval_s=0.0)
        first = asyncio.ensure_future(refresh())
        await asyncio.sleep(0.05)  # the first read is under way: it may predate this caller's principal
        asked_at = time.monotonic()
        await refresh()
        assert len(read.began) == 2 and read.began[1] >= asked_at
        await first
        await refresh.stop()

    asyncio.run(main())


def test_stop_cancels_a_read_waiting_for_its_turn() -> None:
    read = SlowRead()

    async def main() -> None:
        refresh = PrincipalRefresh(read, min_interval_s=60.0)
        await refresh()
        waiting = asyncio.ensure_future(refresh())
        await asyncio.sleep(0.01)
        await refresh.stop()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert len(read.began) == 1

    asyncio.run(main())
