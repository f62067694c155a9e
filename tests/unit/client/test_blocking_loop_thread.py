"""LoopThread, where a BlockingProducer keeps its async parts: results come back to the calling thread, a wait that
times out cancels its coroutine, and stop ends the thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graymq.client.loop_thread import LoopThread


def test_a_coroutine_runs_on_the_loop_thread_and_its_result_comes_back() -> None:
    loop = LoopThread("test-loop")
    loop.start()
    try:
        async def where() -> str:
            return threading.current_thread().name

        assert loop.run(where()) == "test-loop"
    finally:
        loop.stop()


def test_a_wait_that_times_out_cancels_the_coroutine() -> None:
    loop = LoopThread("test-loop")
    loop.start()
    cancelled = threading.Event()

    async def hang() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        with pytest.raises(TimeoutError):
            loop.run(hang(), timeout_s=0.05)
        assert cancelled.wait(5)
    finally:
        loop.stop()


def test_stop_ends_the_thread_and_nothing_runs_after_it() -> None:
    loop = LoopThread("test-loop-stopped")
    loop.start()
    loop.stop()
    assert "test-loop-stopped" not in [t.name for t in threading.enumerate()]

    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="not running"):
        loop.run(nothing())
    loop.stop()  # a second stop is harmless
