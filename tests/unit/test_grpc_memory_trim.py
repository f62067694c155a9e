"""The gRPC endpoint's memory trim after a wave of closed streams: at the wave's end, not in its middle, once more
for the wave's stragglers (a flood's admitted streams close over seconds after its refused ones), and at most
``max_wait_s`` after a wave's first close under steady churn. Driven on a loop whose clock the test moves."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from graymq.broker_ext.grpc_endpoint.memory import MemoryTrim

Steps = list[tuple[float, int]]  # (seconds the clock moves on, streams closing then)


class ClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when the test moves it."""

    now = 0.0

    def time(self) -> float:
        return self.now


def trims_of(steps: Steps, caplog: pytest.LogCaptureFixture) -> list[tuple[float, int]]:
    """(clock, streams trimmed) of each trim of ``MemoryTrim(every=4, delay_s=5, max_wait_s=60)`` as ``steps`` go
    by, the clock then running 200 s on."""
    caplog.set_level(logging.INFO, "graymq.broker_ext.grpc_endpoint.memory")
    loop = ClockLoop()
    at: list[float] = []

    async def tick(seconds: float) -> None:
        for _ in range(int(seconds)):
            loop.now += 1
            await asyncio.sleep(0)  # the timers due now run
            await asyncio.sleep(0)

    async def drive() -> None:
        trim = MemoryTrim(every=4, delay_s=5, max_wait_s=60)
        trim._malloc_trim = lambda pad: at.append(loop.now) or 1
        for seconds, closes in steps:
            await tick(seconds)
            for _ in range(closes):
                trim.released()
        await tick(200)

    try:
        loop.run_until_complete(drive())
    finally:
        loop.close()
    counts = [int(n) for n in re.findall(r"(\d+) gRPC streams closed", caplog.text)]
    return list(zip(at, counts, strict=True))


def test_a_wave_closing_over_time_is_trimmed_once_after_its_last_stream(caplog: pytest.LogCaptureFixture) -> None:
    assert trims_of([(0, 4), (2, 1), (2, 1), (2, 1), (2, 1)], caplog) == [(13, 8)]


def test_the_streams_of_a_wave_closing_after_its_trim_are_trimmed_too(caplog: pytest.LogCaptureFixture) -> None:
    assert trims_of([(0, 4), (10, 2)], caplog) == [(5, 4), (15, 2)]


def test_fewer_streams_than_a_wave_closing_are_not_trimmed(caplog: pytest.LogCaptureFixture) -> None:
    assert trims_of([(0, 3)], caplog) == []


def test_steady_churn_is_trimmed_within_the_longest_wait(caplog: pytest.LogCaptureFixture) -> None:
    trims = trims_of([(0, 4)] + [(2, 1)] * 50, caplog)  # a close every 2 s for 100 s
    assert trims[0] == (60, 4 + 29)  # the wave's first 4 at 0 s, then one at each of 2, 4 ... 58 s
