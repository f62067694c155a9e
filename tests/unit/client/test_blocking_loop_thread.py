"""LoopThread, where a BlockingProducer keeps its async parts: results come back to the calling thread, a wait that
times out cancels its coroutine, and stop ends the thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graymq.client.loop_thread import LoopThread, shared_loop


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


def test_a_loop_it_was_given_runs_its_coroutines_and_stays_running_after_stop() -> None:
    owner = LoopThread("test-loop-owner")
    owner.start()
    try:
        borrower = LoopThread("unused-name")
        assert owner.loop is not None
        borrower.start(owner.loop)

        async def where() -> str:
            return threading.current_thread().name

        assert borrower.run(where()) == "test-loop-owner"
        borrower.stop()
        assert owner.loop.is_running() and owner.run(where()) == "test-loop-owner"
        with pytest.raises(RuntimeError, match="not running"):
            borrower.run(where())
    finally:
        owner.stop()


def test_the_shared_loop_is_one_loop_running_on_its_own_thread() -> None:
    assert shared_loop() is shared_loop()
    assert shared_loop().is_running()
