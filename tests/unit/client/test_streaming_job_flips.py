"""A Spark job's flips through the gray state machine, on fakes: no Spark session, no name server, no broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graymq.client.message import MessageQueue
from graymq.client.spark.job import StreamingJob
from graymq.protocol.errors import DrainTimeoutError
from graymq.protocol.membership import ClientState

pytestmark = pytest.mark.unit
OPTIONS = {"nameserver": "http://127.0.0.1:1", "topic": "T", "group": "G"}


class FakeQuery:
    def __init__(self, gray: bool, trigger: dict[str, Any], checkpoint: str) -> None:
        self.gray, self.trigger, self.checkpoint = gray, trigger, checkpoint
        self.isActive = True
        self.status = {"isTriggerActive": False, "message": "Waiting for next trigger"}
        self.lastProgress: dict[str, Any] | None = None  # no micro-batch completed yet

    def stop(self) -> None:
        self.isActive = False

    def awaitTermination(self, timeout: float) -> bool:
        self.isActive = False  # an availableNow run reads what is there and ends
        return True

    def exception(self) -> None:
        return None


class FakeWriter:
    def __init__(self, spark: FakeSpark, gray: bool) -> None:
        self.spark, self.gray, self.checkpoint, self.triggered = spark, gray, "", {}

    def option(self, key: str, value: str) -> FakeWriter:
        self.checkpoint = value
        return self

    def trigger(self, **trigger: Any) -> FakeWriter:
        self.triggered = trigger
        return self

    def start(self) -> FakeQuery:
        query = FakeQuery(self.gray, self.triggered, self.checkpoint)
        self.spark.queries.append(query)
        return query


class FakeSpark:
    class conf:
        @staticmethod
        def get(key: str, default: Any) -> Any:
            return default

    class sparkContext:
        appName, applicationId = "app", "app-1"

    def __init__(self) -> None:
        self.queries: list[FakeQuery] = []

    @property
    def readStream(self) -> FakeSpark:
        return self

    def format(self, name: str) -> FakeSpark:
        return self

    def options(self, **options: str) -> FakeSpark:
        return self

    def load(self) -> FakeSpark:
        return self


class FakeMember:
    """The job's name server client: the desired lane and switch it learnt, what the job reported, the lanes whose
    backlog it read."""

    client_id = "job-1"

    def __init__(self, desired_lane: str | None, backlogs: list[int | None], *, gray_switch: bool = True,
                 on_backlog: Callable[[FakeMember], None] | None = None) -> None:
        self.desired_lane, self.gray_switch = desired_lane, gray_switch
        self.backlogs, self.on_backlog = backlogs, on_backlog
        self.reports: list[tuple[str | None, ClientState]] = []
        self.backlogs_read: list[str] = []
        self.committed: list[dict[MessageQueue, int]] = []
        self.commit_error: Exception | None = None
        self.stopped = False

    def report(self, lane: str | None, state: ClientState) -> bool:
        self.reports.append((lane, state))
        return True

    def commit_processed(self, offsets: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
        if self.commit_error is not None:
            raise self.commit_error
        self.committed.append(offsets)
        return offsets

    def stop(self) -> None:
        self.stopped = True

    def gray_backlog(self, lane: str) -> int | None:
        self.backlogs_read.append(lane)
        if self.on_backlog is not None:
            self.on_backlog(self)
        return self.backlogs.pop(0)


def running_job(lane: str | None, member: FakeMember, drain_timeout_s: float = 60.0
                ) -> tuple[StreamingJob, FakeSpark]:
    spark = FakeSpark()
    side = {"lane": lane} if lane else {}
    job = StreamingJob(spark, {**OPTIONS, **side}, lambda frame, side: FakeWriter(spark, side), "/ckpt",
                       drain_timeout_s=drain_timeout_s)
    job.member = member
    job.query = job._start_query(lane, job.trigger)
    return job, spark


def streaming(spark: FakeSpark) -> FakeQuery:
    query = spark.queries[-1]
    assert query.isActive and "availableNow" not in query.trigger
    return query


def test_gray_to_normal_drains_until_the_gray_backlog_is_zero_then_reports_normal() -> None:
    job, spark = running_job("gray", FakeMember(None, [3, 0]))
    job.poll()
    assert job.member.reports == [("gray", ClientState.DRAINING), (None, ClientState.NORMAL)]
    assert job.gray_state.state is ClientState.NORMAL and not job.gray
    assert [q.trigger for q in spark.queries[1:-1]] == [{"availableNow": True}] * 2
    assert not spark.queries[0].isActive and streaming(spark).checkpoint == "/ckpt/normal"


def test_desired_gray_again_during_the_drain_abandons_it_and_restarts_the_gray_query() -> None:
    def operator_rolls_back(member: FakeMember) -> None:
        member.desired_lane = "gray"

    job, spark = running_job("gray", FakeMember(None, [5], on_backlog=operator_rolls_back))
    job.poll()
    assert job.member.reports == [("gray", ClientState.DRAINING), ("gray", ClientState.GRAY)]
    assert job.gray_state.state is ClientState.GRAY
    assert streaming(spark).checkpoint == "/ckpt/gray"
    job.poll()  # desired and effective flag agree now
    assert len(job.member.reports) == 2


def test_a_drain_timeout_leaves_the_job_gray_and_the_next_poll_drains_again() -> None:
    member = FakeMember(None, [5, 0])
    job, spark = running_job("gray", member, drain_timeout_s=-1.0)
    with pytest.raises(DrainTimeoutError, match="5 messages of lane gray left"):
        job.poll()
    assert member.reports == [("gray", ClientState.DRAINING), ("gray", ClientState.GRAY)]
    assert job.gray_state.state is ClientState.GRAY and streaming(spark).checkpoint == "/ckpt/gray"
    job.drain_timeout_s = 60.0
    job.poll()
    assert member.reports[2:] == [("gray", ClientState.DRAINING), (None, ClientState.NORMAL)]


def test_with_the_gray_switch_off_the_flip_to_normal_drains_nothing() -> None:
    job, spark = running_job("gray", FakeMember(None, [], gray_switch=False))
    job.poll()
    assert job.member.reports == [("gray", ClientState.DRAINING), (None, ClientState.NORMAL)]
    assert len(spark.queries) == 2 and streaming(spark).checkpoint == "/ckpt/normal"


def test_normal_to_gray_stops_the_normal_query_and_starts_the_gray_one() -> None:
    job, spark = running_job(None, FakeMember("gray", []))
    job.poll()
    assert job.member.reports == [("gray", ClientState.GRAY)]
    assert job.gray_state.state is ClientState.GRAY and job.gray
    assert not spark.queries[0].isActive and streaming(spark).checkpoint == "/ckpt/gray"


def test_a_lane_job_drains_its_own_lane_then_joins_the_next_lane_through_normal() -> None:
    member = FakeMember("v2", [4, 0])
    job, spark = running_job("v3", member)
    assert streaming(spark).checkpoint == "/ckpt/v3" and job.lane == "v3"
    job.poll()  # v3 drained first: the job is normal a moment
    assert member.reports == [("v3", ClientState.DRAINING), (None, ClientState.NORMAL)]
    assert member.backlogs_read == ["v3", "v3"], "only the job's own lane's backlog decides its drain"
    assert streaming(spark).checkpoint == "/ckpt/normal"
    job.poll()
    assert member.reports[2:] == [("v2", ClientState.GRAY)] and job.lane == "v2"
    assert streaming(spark).checkpoint == "/ckpt/v2"


def test_a_lane_job_wanted_back_in_its_lane_during_the_drain_abandons_it() -> None:
    def back_to_v3(member: FakeMember) -> None:
        member.desired_lane = "v3"

    job, spark = running_job("v3", FakeMember(None, [5], on_backlog=back_to_v3))
    job.poll()
    assert job.member.reports == [("v3", ClientState.DRAINING), ("v3", ClientState.GRAY)]
    assert job.lane == "v3" and streaming(spark).checkpoint == "/ckpt/v3"


def test_a_stopped_query_commits_the_end_of_its_last_batch_and_a_failed_commit_does_not_keep_the_job_registered(
        caplog: pytest.LogCaptureFixture) -> None:
    """The source commits a batch's end only when the next batch is planned: the job commits the last one's."""
    member = FakeMember(None, [])
    job, spark = running_job(None, member)
    spark.queries[-1].lastProgress = {"sources": [{"endOffset": '{"T": {"b": {"1": 7, "2": 5}}}'}]}
    job.stop()
    assert member.committed == [{MessageQueue("T", "b", 1): 7, MessageQueue("T", "b", 2): 5}] and member.stopped

    member = FakeMember(None, [])
    job, spark = running_job(None, member)
    spark.queries[-1].lastProgress = {"sources": [{"endOffset": '{"T": {"b": {"1": 7}}}'}]}
    member.commit_error = LookupError("no broker b in the route")
    job.stop()
    assert member.stopped and job.query is None and not spark.queries[-1].isActive
    assert "was not committed (LookupError: no broker b in the route)" in caplog.text


def test_the_pipeline_is_given_the_side_of_its_writes_true_for_the_gray_lane() -> None:
    """``True`` for gray, as before lanes (a pipeline passing it on as ``grayFlag`` keeps working), else the lane."""
    sides = {lane: running_job(lane, FakeMember(lane, []))[1].queries[-1].gray for lane in ("gray", "v3", None)}
    assert sides == {"gray": True, "v3": "v3", None: False}


def test_the_jobs_member_and_producer_are_given_one_config_so_they_heartbeat_through_one_instance(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from graymq.client.spark import job as job_module

    given: dict[str, Any] = {}

    class Member:
        client_id, desired_lane = "job-1", None

        def __init__(self, options: Any, *, config: Any, **_: Any) -> None:
            given["member"] = config

        async def start(self) -> None:
            return None

        async def stop(self) -> None:
            return None

    class Producer(Member):
        writing = None

        def __init__(self, group: str, config: Any, **_: Any) -> None:
            given["producer"] = config

        async def declare(self, lane: str | None) -> None:
            return None

        async def report_writing(self, lane: str | None) -> bool:
            return True

        def side(self, job_lane: str | None) -> str | None:
            return job_lane

    monkeypatch.setattr(job_module, "SparkMember", Member)
    monkeypatch.setattr(job_module, "JobProducer", Producer)
    monkeypatch.setattr(job_module, "register", lambda spark: None)
    spark = FakeSpark()
    job = StreamingJob(spark, OPTIONS, lambda frame, side: FakeWriter(spark, side), "/ckpt", producer_group="PG")
    job.start()
    job.stop()
    assert given["member"] is given["producer"]
    assert given["member"].nameserver == (OPTIONS["nameserver"],)



class BatchesQuery(FakeQuery):
    """A query whose ``status`` reads are the given (trigger active, message) pairs in turn, the last one repeating."""

    def __init__(self, *statuses: tuple[bool, str]) -> None:
        super().__init__(False, {}, "/ckpt/normal")
        self.statuses = [{"isTriggerActive": active, "message": message} for active, message in statuses]
        self.reads = 0

    @property  # type: ignore[override]
    def status(self) -> dict[str, Any]:
        self.reads += 1
        return self.statuses[min(self.reads, len(self.statuses)) - 1]

    @status.setter
    def status(self, value: dict[str, Any]) -> None:
        pass  # FakeQuery's own


@pytest.mark.parametrize(("statuses", "reads"), [
    # a batch running, then the next trigger asking the source for offsets (batches back to back): stop there
    ([(True, "Processing new data"), (True, "Processing new data"), (True, "Getting offsets from source")], 3),
    ([(True, "Writing offsets to log"), (True, "Processing new data"), (True, "Waiting for next trigger")], 3),
    ([(True, "No new data but cleaning up state"), (False, "Waiting for next trigger")], 2),
    ([(True, "Waiting for data to arrive")], 1),
])
def test_a_stop_waits_for_the_running_batch_not_for_a_gap_between_triggers(
        monkeypatch: pytest.MonkeyPatch, statuses: list[tuple[bool, str]], reads: int) -> None:
    job, _ = running_job(None, FakeMember(None, []))
    job.stop_grace_s = 3600.0
    job.query = query = BatchesQuery(*statuses)

    def sleep(seconds: float) -> None:
        assert query.reads < 10, f"still waiting at {query.status}"

    monkeypatch.setattr("graymq.client.spark.job.time.sleep", sleep)
    job._stop_query()
    assert query.reads == reads and not query.isActive and job.query is None


def test_a_batch_still_running_at_the_end_of_the_grace_is_stopped() -> None:
    job, _ = running_job(None, FakeMember(None, []))
    job.stop_grace_s = 0.0
    job.query = query = BatchesQuery((True, "Processing new data"))
    job._stop_query()
    assert not query.isActive and job.query is None
