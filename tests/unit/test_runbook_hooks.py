"""A runbook's owner stops a rollout's weight steps through its public ``abort`` and hears them end through
``RunbookHooks``: no subclass reaches into the runner's steps (the console's abort relies on this)."""

from __future__ import annotations

import asyncio

import pytest

from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.operations import CutoverKind, CutoverMode
from graymq.runbooks.hooks import RunbookHooks
from graymq.runbooks.policy import RolloutPolicy
from graymq.runbooks.rollout import RolloutReport, RolloutRunner

pytestmark = pytest.mark.unit


def runner_with_steps(steps: object, heard: list[str]) -> RolloutRunner:
    runner = RolloutRunner(NameServerClient("http://127.0.0.1:1"), "G", RolloutPolicy([5, 50], 1.0),
                           hooks=RunbookHooks(steps_ended=lambda report: heard.append(report.message)))
    runner._weighted_steps = steps  # type: ignore[method-assign]
    return runner


def test_an_abort_ends_the_weight_steps_as_a_failed_check_and_the_owner_hears_why() -> None:
    heard: list[str] = []

    async def forever(report: RolloutReport) -> bool:
        await asyncio.Event().wait()
        return True

    runner = runner_with_steps(forever, heard)
    report = RolloutReport(1, CutoverKind.ROLLOUT, CutoverMode.PROMOTE, "G")

    async def go() -> bool:
        steps = asyncio.create_task(runner._abortable_steps(report))
        await asyncio.sleep(0.01)
        assert runner.abort("aborted from the console by ops")
        return await asyncio.wait_for(steps, 10)

    assert asyncio.run(go()) is False  # rolls back, as after a failed check
    assert heard == ["aborted from the console by ops"] and report.message == heard[0]
    assert not runner.abort("again")  # past its steps: an abort no longer rolls back


def test_steps_that_pass_end_as_they_did_and_a_later_abort_is_refused() -> None:
    heard: list[str] = []

    async def passing(report: RolloutReport) -> bool:
        return True

    runner = runner_with_steps(passing, heard)
    report = RolloutReport(1, CutoverKind.ROLLOUT, CutoverMode.PROMOTE, "G")
    assert asyncio.run(runner._abortable_steps(report)) is True
    assert heard == [""] and not runner.abort("too late")
