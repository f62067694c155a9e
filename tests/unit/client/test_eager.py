"""``run_eagerly``: a coroutine run at once, with a task only for what is left after it first waits."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from graymq.client.consumer.eager import run_eagerly

pytestmark = pytest.mark.unit
CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="caller")


def test_a_coroutine_that_never_waits_runs_to_its_end_at_once_without_a_task() -> None:
    async def main() -> None:
        seen: list[str] = []

        async def batch() -> None:
            CURRENT.set("batch")
            seen.append(CURRENT.get())

        tasks_before = len(asyncio.all_tasks())
        assert run_eagerly(batch()) is None
        assert seen == ["batch"]
        assert CURRENT.get() == "caller", "what the coroutine set stays in its own context"
        assert len(asyncio.all_tasks()) == tasks_before

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_in_a_task_in_the_same_context() -> None:
    async def main() -> None:
        seen: list[str] = []
        gate = asyncio.get_running_loop().create_future()

        async def batch() -> None:
            token = CURRENT.set("batch")
            seen.append("before")
            seen.append(await gate)
            await asyncio.sleep(0)  # a bare yield to the loop too
            seen.append(CURRENT.get())
            CURRENT.reset(token)  # a token is valid only in the context that made it

        task = run_eagerly(batch(), name="eager batch")
        assert task is not None and task.get_name() == "eager batch"
        assert seen == ["before"] and CURRENT.get() == "caller"
        gate.set_result("woken")
        await asyncio.wait_for(task, 5)
        assert seen == ["before", "woken", "batch"]

    asyncio.run(main())


def test_cancelling_the_task_cancels_what_the_coroutine_waits_for_and_lets_it_clean_up() -> None:
    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cleaned: list[str] = []

        async def batch() -> None:
            try:
                await gate
            finally:
                cleaned.append("finally")

        task = run_eagerly(batch())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gate.cancelled() and cleaned == ["finally"]

    asyncio.run(main())


def test_a_coroutine_that_catches_its_cancellation_decides_how_it_ends() -> None:
    async def main() -> None:
        async def batch() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0)
                raise ValueError("cleaned up, then failed") from None

        task = run_eagerly(batch())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(ValueError, match="cleaned up"):
            await task

    asyncio.run(main())


def test_errors_raised_before_the_first_wait_reach_the_caller_and_later_ones_end_the_task() -> None:
    async def main() -> None:
        async def fails_at_once() -> None:
            raise KeyError("now")

        async def fails_later() -> None:
            await asyncio.sleep(0)
            raise KeyError("later")

        with pytest.raises(KeyError, match="now"):
            run_eagerly(fails_at_once())
        task = run_eagerly(fails_later())
        assert task is not None
        with pytest.raises(KeyError, match="later"):
            await task

    asyncio.run(main())
