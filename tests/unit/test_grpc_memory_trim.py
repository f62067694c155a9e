"""The gRPC endpoint's memory trim after a wave of closed streams: at the wave's end, not in its middle, and once
more for the wave's stragglers (a flood's admitted streams close over seconds after its refused ones)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from graymq.broker_ext.grpc_endpoint.memory import MemoryTrim

DELAY_S = 0.05


async def _trims_after(closes: list[float], every: int = 4) -> tuple[list[int], int]:
    """Each close ``released()`` after its pause (seconds); the malloc_trim calls of each trim, and the trims."""
    trim = MemoryTrim(every=every, delay_s=DELAY_S, max_wait_s=10 * DELAY_S)
    calls: list[int] = []
    trim._malloc_trim = lambda pad: calls.append(pad) or 1
    for pause in closes:
        await asyncio.sleep(pause)
        trim.released()
    await asyncio.sleep(3 * DELAY_S)
    for _ in range(100):  # a loaded machine: the last trim's timer may still be due
        if trim._pending is None:
            break
        await asyncio.sleep(DELAY_S)
    return calls, trim.trims


def test_a_wave_closing_over_time_is_trimmed_once_after_its_last_stream(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "graymq.broker_ext.grpc_endpoint.memory")
    calls, trims = asyncio.run(_trims_after([0.0] * 4 + [DELAY_S / 2] * 4))  # 4 at once, 4 more within the delay
    assert (calls, trims) == ([0], 1)
    assert "8 gRPC streams closed" in caplog.text


def test_the_streams_of_a_wave_closing_after_its_trim_are_trimmed_too() -> None:
    calls, trims = asyncio.run(_trims_after([0.0] * 4 + [3 * DELAY_S] + [0.0]))  # 2 stragglers after the trim
    assert trims == 2


def test_fewer_streams_than_a_wave_closing_are_not_trimmed() -> None:
    assert asyncio.run(_trims_after([0.0] * 3)) == ([], 0)
