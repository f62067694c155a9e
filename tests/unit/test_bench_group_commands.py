"""A bench worker's status loop (``serve_group_commands``): the status is built only when its consumers' mark
changed, and written only when it differs; without a mark it is built at every look."""

from __future__ import annotations

import asyncio
import queue
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from graymq.bench.common import consumers_mark, serve_group_commands

pytestmark = pytest.mark.unit


def serve(tmp_path: Path, marks: list[object] | None) -> tuple[int, str]:
    """Run the loop for 0.5 s, looking every millisecond (``marks``: what the mark says at each look, the last one
    after; None: no mark); how many statuses it built and the file's last content."""
    built, looks = [0], [0]
    commands: queue.Queue[object] = queue.Queue()
    path = tmp_path / "status.json"

    def status() -> str:
        built[0] += 1
        return f"status {built[0] // 2}"  # a status that changes every second build

    def mark() -> object:
        assert marks is not None
        looks[0] += 1
        return marks[min(looks[0], len(marks)) - 1]

    async def idle(_: str) -> None:
        return None

    ending = threading.Timer(0.5, commands.put, [None])
    ending.start()
    asyncio.run(serve_group_commands(status, str(path), commands, idle, idle, 0.001,
                                     mark=None if marks is None else mark))
    assert marks is None or looks[0] > len(marks), looks  # every mark was looked at
    return built[0], path.read_text()


def test_the_status_is_built_only_when_the_mark_changes(tmp_path: Path) -> None:
    marks: list[object] = ["a", "a", "a", "b", "b", ("c", 1), ("c", 1)]
    built, written = serve(tmp_path, marks)
    assert built == 3  # the first look, "b" and ("c", 1); equal marks build nothing
    assert written == "status 1"


def test_without_a_mark_the_status_is_built_at_every_look(tmp_path: Path) -> None:
    built, written = serve(tmp_path, None)
    assert built >= 3 and written.startswith("status ")  # a look a millisecond: many more on an idle machine


def test_a_consumers_mark_follows_their_lane_switch_and_queues() -> None:
    def consumer(lane: str | None, switch: bool, *queues: str) -> SimpleNamespace:
        return SimpleNamespace(lane=lane, gray_switch=switch, assignment=SimpleNamespace(queues=dict.fromkeys(queues)))

    base = consumers_mark({"c1": consumer(None, True, "q1", "q2")})
    assert consumers_mark({"c1": consumer(None, True, "q1", "q2")}) == base
    for changed in (consumer("v2", True, "q1", "q2"), consumer(None, False, "q1", "q2"), consumer(None, True, "q1")):
        assert consumers_mark({"c1": changed}) != base
    assert consumers_mark({"c2": consumer(None, True, "q1", "q2")}) != base
