"""``graymq gray promote|rollback GROUP --then GROUP2 ...``: the stages parsed from the command line, the report's
done and not done, and every invalid combination refused in one line with exit 2 before any request."""

from __future__ import annotations

import asyncio
import doctest

import pytest

from graymq.gray_controller.cli import build_parser, main
from graymq.gray_controller.cli.pipeline_cmd import cutover_lines
from graymq.nameserver_api.client import ConflictError
from graymq.nameserver_api.records import CutoverRecord
from graymq.protocol.errors import ConfigError
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState
from graymq.runbooks import pipeline
from graymq.runbooks.cutover import CutoverReport
from graymq.runbooks.pipeline import PipelineReport, PipelineStage, check_stages

NOWHERE = "http://127.0.0.1:9"  # nothing listens: a request would fail with exit 1, not 2


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["gray", *argv])


def test_producer_groups_belong_to_the_group_named_before_them() -> None:
    args = parse("promote", "--producer-group", "IN", "STAGE", "--producer-group", "IN2", "--then", "SINK",
                 "--producer-group", "OUT", "--then", "LAST")
    assert args.group == "STAGE" and args.producer_group == ["IN", "IN2"]
    assert args.then == [("SINK", ["OUT"]), ("LAST", [])]


def test_without_then_promote_parses_as_before() -> None:
    args = parse("promote", "G", "--producer-group", "P", "--producer-group", "Q")
    assert (args.producer_group, args.then) == (["P", "Q"], None)
    assert parse("rollback", "G").producer_group is None


def test_rollback_takes_then_and_its_mode() -> None:
    args = parse("rollback", "STAGE", "--then", "SINK", "--adopt")
    assert (args.then, args.mode) == ([("SINK", [])], "adopt")


def test_a_pipeline_naming_a_group_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="SINK is named twice"):
        check_stages([PipelineStage("STAGE"), PipelineStage("SINK"), PipelineStage("SINK")])


@pytest.mark.parametrize(("argv", "message"), [
    (["promote", "STAGE", "--then", "STAGE"], "group STAGE is named twice in the pipeline"),
    (["rollback", "STAGE", "--then", "SINK", "--then", "SINK"], "group SINK is named twice in the pipeline"),
    (["promote", "STAGE", "--then", "bad name"], "bad name"),
    (["promote", "STAGE", "--then", "SINK", "--producer-group", "bad/name"], "bad/name"),
    (["promote", "STAGE", "--then", "SINK", "--timeout", "0"], "--timeout must be > 0"),
])
def test_invalid_pipelines_exit_2_in_one_line_before_any_request(argv, message, capsys) -> None:
    assert main(["gray", *argv, "--nameserver", NOWHERE]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv", [["status", "G", "--then", "H"], ["flag", "G", "c", "off", "--then", "H"],
                                  ["promote", "--then", "H"]])
def test_then_outside_promote_and_rollback_is_a_usage_error(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2


def test_the_report_says_which_stages_are_done_and_which_not() -> None:
    stages = [PipelineStage("A"), PipelineStage("B"), PipelineStage("C")]
    report = PipelineReport(CutoverKind.PROMOTE, CutoverMode.DRAIN, stages, state=CutoverState.FAILED)
    report.results = [{"group": "A", "state": "SUCCEEDED"}, {"group": "B", "state": "FAILED", "message": "timed out"}]
    data = report.to_json()
    assert (data["group"], data["groups_done"], data["groups_left"]) == ("A", ["A"], ["B", "C"])
    assert [s["group"] for s in data["stages"]] == ["A", "B"]


def test_a_stage_refused_before_its_operation_started_prints_one_line() -> None:
    refused = {"group": "B", "kind": "promote", "state": "FAILED", "message": "a rollback is running"}
    assert cutover_lines(refused, "stage 2/2: ") == ["stage 2/2: promote of B FAILED: a rollback is running"]
    done = {"group": "A", "kind": "promote", "operation_id": 4, "state": "SUCCEEDED", "message": "",
            "timings_s": {"producers": 0.1, "drain": 0.2}, "nothing_to_promote": True}
    assert cutover_lines(done) == ["promote #4 of A SUCCEEDED in 0.30 s (producers 0.10 s, drain 0.20 s)",
                                   "nothing to promote: A has no gray client and no gray rule"]


def test_doctests() -> None:
    assert doctest.testmod(pipeline).failed == 0


def test_lane_applies_to_every_stage_of_a_pipeline() -> None:
    args = parse("promote", "STAGE", "--lane", "v3", "--then", "SINK")
    assert (args.lane, args.then) == ("v3", [("SINK", [])])
    assert parse("promote", "STAGE", "--then", "SINK").lane == "gray"


class FakeNameServer:
    """Every group known; the running operations of each group as listed."""

    def __init__(self, running: dict[str, list[CutoverRecord]]) -> None:
        self.running = running

    async def get_group(self, group: str) -> None:
        return None

    async def list_cutovers(self, group: str, state: str | None = None) -> list[CutoverRecord]:
        return self.running.get(group, [])


def running_op(lane: str, kind: str = "rollback") -> CutoverRecord:
    return CutoverRecord.from_json({"id": 7, "group": "SINK", "kind": kind, "mode": "drain", "producer_groups": [],
                                    "state": "RUNNING", "step": "drain", "result": None, "started_by": "ops",
                                    "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
                                    "finished_at": None, "lane": lane})


def test_each_stage_runs_the_cutover_of_the_pipelines_lane(monkeypatch) -> None:
    lanes: list[tuple[str, str]] = []

    class Runner:
        def __init__(self, ns: object, group: str, policy: object, progress: object, *, lane: str) -> None:
            self.group = group
            lanes.append((group, lane))

        async def promote(self) -> CutoverReport:
            return CutoverReport(1, CutoverKind.PROMOTE, CutoverMode.DRAIN, self.group, state=CutoverState.SUCCEEDED)

        async def close(self) -> None:
            return None

    monkeypatch.setattr(pipeline, "CutoverRunner", Runner)
    ns = FakeNameServer({"SINK": [running_op("v2")]})  # another lane's rollback is no conflict
    runner = pipeline.PipelineRunner(ns, [PipelineStage("STAGE"), PipelineStage("SINK")],  # type: ignore[arg-type]
                                     CutoverKind.PROMOTE, lane="v3")
    report = asyncio.run(runner.run())
    assert lanes == [("STAGE", "v3"), ("SINK", "v3")]
    assert report.to_json()["lane"] == "v3" and report.groups_done == ["STAGE", "SINK"]
    ns.running["SINK"].append(running_op("v3"))
    with pytest.raises(ConflictError, match="rollback .* #7 is running on SINK"):
        asyncio.run(pipeline.PipelineRunner(ns, [PipelineStage("STAGE"), PipelineStage("SINK")],  # type: ignore[arg-type]
                                            CutoverKind.PROMOTE, lane="v3").run())
