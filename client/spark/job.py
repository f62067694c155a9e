"""StreamingJob: a graymq streaming pipeline that runs in a lane or base and follows its lane, draining on leaving it.

Life cycle (the name server holds the desired lane; the job reports the lane it is in). The gray side is the lane
``gray``; what is said of gray below holds for every lane (docs/lanes.md):

- start: the job registers as a ``spark`` client (labels ``app_name``, ``app_id`` and yours),
  declaring the lane of its config (``lane`` or ``grayFlag`` option, else ``spark.graymq.lane`` or
  ``spark.graymq.grayFlag``), and starts the streaming query of the lane the name server answers (a rule on its
  labels or an explicit flag override the declaration) with checkpoint ``<root>/<lane>`` (``<root>/gray`` for
  the gray side) or ``<root>/normal``.
- gray → normal (``graymq gray promote``, or ``graymq gray flag GROUP CLIENT off``): the job
  reports DRAINING, stops the gray query and runs it once more with ``availableNow`` on the
  gray checkpoint — to the gray queues' max offsets as of that moment (producers were flipped
  first, so that is every gray message). The source commits the run's final offsets to the
  brokers before the run returns (see ``graymq.client.spark.stream``); the job then checks the gray
  backlog on the brokers, runs again if gray messages arrived meanwhile, reports gray=false /
  NORMAL, and starts the normal query on ``<root>/normal`` from the group's committed offsets.
  With the group's gray switch off there is nothing to drain (every queue is normal).
- normal → gray: the normal query stops, the job reports GRAY and starts the gray query.
- lane A → lane B: A is drained as above (the job is base a moment), then the job becomes B's.

A drain that does not finish in ``drain_timeout_s`` restarts the gray query, reports GRAY and
raises ``DrainTimeoutError`` from ``poll``; ``run`` logs it and tries again on the next poll.

Writes (``producer_group``: the producer group the pipeline's ``graymq`` sink writes in): the job also registers
once in that group, as a producer with its client id and labels (``job_producer.JobProducer``), declaring its
side. The pipeline is given the side of the writes, which follows that producer group's flag as a producer's
does: when a promote's producer step or ``graymq gray flag PGROUP CLIENT off`` sets it normal, the job restarts
its query between micro-batches writing normal, then reports normal. The sink's tasks then send with
``registerProducer=false``, on the side decided here. Without ``producer_group`` the pipeline is given the job's
side and each sink task registers on its own. The restart waits for the running micro-batch (a trigger still
planning its batch is stopped before it sends); should a batch begin in the instant before the stop, it is re-run
on the new side and its rows stored on both.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.errors import StreamingQueryException

from graymq.client.config import ClientConfig
from graymq.client.spark.job_producer import JobProducer
from graymq.client.spark.member import SparkMember
from graymq.client.spark.offsets import processed_offsets
from graymq.client.spark.options import SourceOptions, side_mark, side_options, with_conf_gray_flag
from graymq.client.spark.source import GraymqDataSource, register
from graymq.client.sync import SyncFacade
from graymq.core.gray_flip import FlipAction, GrayFlip
from graymq.core.gray_side import Mark
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.errors import DrainTimeoutError, GrayMQError
from graymq.protocol.membership import ClientState

log = logging.getLogger(__name__)

# Builds the sink of the job from the source DataFrame and the side of its writes (False: base, True: the gray lane,
# else a lane's name; ``options.side_options`` gives the sink's options for it); the job sets the checkpoint location,
# the trigger and, with a ``producer_group``, the sink's side and producer options.
Pipeline = Callable[[Any, Mark], Any]


class QueryFailed(GrayMQError):
    """The job's streaming query stopped on its own after ``query_restarts`` restarts (its error is the cause)."""


class StreamingJob:
    query_restarts = 3  # a query that stopped on its own is started again this often without a micro-batch between

    def __init__(self, spark: Any, options: Mapping[str, str], pipeline: Pipeline, checkpoint_root: str, *,
                 trigger: Mapping[str, Any] | None = None, labels: Mapping[str, str] | None = None,
                 client_id: str | None = None, heartbeat_interval_s: float = 2.0, drain_timeout_s: float = 300.0,
                 poll_s: float = 1.0, stop_grace_s: float = 60.0, producer_group: str | None = None) -> None:
        self.spark = spark
        self.options = with_conf_gray_flag(spark, options)
        self.source = SourceOptions.parse(self.options)
        self.pipeline = pipeline
        self.checkpoint_root = checkpoint_root.rstrip("/")
        self.trigger = dict(trigger or {})
        context = spark.sparkContext
        self.labels = {"app_name": context.appName, "app_id": context.applicationId, **(labels or {})}
        self.client_id = client_id
        self.heartbeat_interval_s = heartbeat_interval_s
        self.drain_timeout_s = drain_timeout_s
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s
        self.flip = GrayFlip(side_mark(self.source.gray, self.source.lane), drain_timeout_s=drain_timeout_s,
                             drain_poll_s=poll_s)
        self.flip.follow_changes()  # a desired lane other than the declared one flips from the start
        self.gray_state = self.flip.gray_state
        self.query: Any = None
        self.member: Any = None
        self.producer_group = producer_group
        self.producer: Any = None
        self._failed_runs = 0

    @property
    def gray(self) -> bool:
        """The job's effective flag (a draining job is still gray)."""
        return self.gray_state.gray

    @property
    def lane(self) -> str | None:
        """The lane the job is in (a draining job still is; ``gray``: the gray side); None: base."""
        return self.flip.in_lane

    def checkpoint(self, lane: str | None) -> str:
        return f"{self.checkpoint_root}/{lane or 'normal'}"

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> None:
        register(self.spark)
        config = ClientConfig.from_env(self.source.nameserver, self.source.token)  # one instance: one heartbeat
        self.member = SyncFacade(lambda: SparkMember(
            self.source, labels=self.labels, client_id=self.client_id, heartbeat_interval_s=self.heartbeat_interval_s,
            config=config))
        self.member.start()
        self.client_id = self.member.client_id
        if self.producer_group is not None:
            self.producer = SyncFacade(lambda: JobProducer(
                self.producer_group, config, client_id=self.member.client_id, labels=self.labels, lane=self.lane,
                heartbeat_interval_s=self.heartbeat_interval_s))
            self.producer.start()
        if self.member.desired_lane == self.lane:
            self.query = self._start_query(self.lane, self.trigger)
        else:  # the name server already says otherwise (a rule on the labels, an explicit flag)
            self._follow(self.member.desired_lane)

    def stop(self) -> None:
        log.info("spark job %s: stopping after the running micro-batch", self.client_id)
        self._stop_query()
        if self.producer is not None:
            self.producer.stop()
            self.producer = None
        if self.member is not None:
            self.member.stop()
            self.member = None

    def retire(self, timeout_s: float = 120.0) -> None:
        """Stop for good with the group's committed offsets exactly at what the job processed, for the job that
        takes its side over (an old normal job once the new one is promoted: two Spark jobs on one side would
        both read every queue). The query stops between micro-batches, runs once more with ``availableNow`` on
        its checkpoint (what arrived meanwhile; its final offsets are committed to the brokers before it
        returns, as in a drain), then the job unregisters."""
        self._stop_query()
        deadline = time.monotonic() + timeout_s
        while not (finished := self._run_available_now(deadline, self.lane)) and time.monotonic() < deadline:
            log.info("spark job %s: running the last availableNow run again", self.client_id)
        if not finished:
            log.warning("spark job %s: retired without finishing its last availableNow run in %.0f s; the group's "
                        "offsets are at what it processed, the job taking its side over reads the rest",
                        self.client_id, timeout_s)
        self.stop()

    def run(self, stop: threading.Event) -> None:
        """Start, follow the desired lane until ``stop`` is set, then stop."""
        try:
            self._retrying_drain(self.start)
            while not stop.wait(self.poll_s):
                self._retrying_drain(self.poll)
        finally:
            self.stop()

    @staticmethod
    def _retrying_drain(step: Callable[[], None]) -> None:
        try:
            step()
        except DrainTimeoutError as exc:
            log.warning("%s; will retry while the desired lane stays another", exc.message)

    def poll(self) -> None:
        """One step: restart a query that died, act when the desired lane differs from the job's, restart the
        query when the side of its writes changed."""
        self._restart_failed_query()
        self._follow(self.member.desired_lane)
        if self.query is not None and self.producer is not None and (
                writes := self._writes_lane(self.lane)) != self.producer.writing:
            log.info("spark job %s: producer group %s says write %s; restarting the query", self.client_id,
                     self.producer_group, f"lane {writes}" if writes else "normal")
            self._stop_query()
            self.query = self._start_query(self.lane, self.trigger)

    def _restart_failed_query(self) -> None:
        """A query that stopped on its own (say, Spark could not start a Python worker in time) runs again from its
        checkpoint, which repeats no stored row (the sink is idempotent per batch); after ``query_restarts``
        restarts without a micro-batch in between, ``QueryFailed``."""
        if self.query is None:
            return
        if self.query.isActive:
            if self.query.lastProgress is not None:
                self._failed_runs = 0
            return
        error = self.query.exception()
        self._failed_runs += 1
        if self._failed_runs > self.query_restarts:
            raise QueryFailed(f"streaming query of spark job {self.client_id} stopped") from error
        log.warning("spark job %s: streaming query stopped (%s); restarting it from its checkpoint (%d of %d)",
                    self.client_id, error, self._failed_runs, self.query_restarts)
        self.query = self._start_query(self.lane, self.trigger)

    def _follow(self, desired: str | None) -> None:
        """Act on the desired lane (None: base): join it when base, drain the job's lane when it is another."""
        action = self.flip.follow(desired or False, draining=False)
        if action is FlipAction.BECOME_GRAY:
            self._become_lane()
        elif action is FlipAction.START_DRAIN:
            self.drain()

    # -- flips -------------------------------------------------------------------------------
    def drain(self) -> None:
        """Lane → base: process every message of the job's lane, commit, report base, start the base query."""
        lane = self.flip.lane or GRAY_LANE
        log.info("spark job %s: desired lane %s, draining lane %s", self.client_id, self.member.desired_lane or "base",
                 lane)
        self.member.report(lane, ClientState.DRAINING)
        self._stop_query()
        deadline = self.gray_state.begin_drain(self.drain_timeout_s, time.monotonic())
        while self.member.gray_switch:
            self._run_available_now(deadline, lane)
            backlog = self.member.gray_backlog(lane)
            if backlog == 0:
                break
            abandoned = self.member.desired_lane == lane
            if abandoned or self.gray_state.timed_out(time.monotonic()):
                if abandoned:
                    self.gray_state.abandon_drain()
                else:
                    self.gray_state.drain_timed_out()
                self.member.report(lane, ClientState.GRAY)
                self.query = self._start_query(lane, self.trigger)
                if abandoned:
                    log.info("spark job %s: desired lane back to %s, drain abandoned", self.client_id, lane)
                    return
                raise DrainTimeoutError(
                    f"spark job {self.client_id}: drain timed out with "
                    f"{backlog if backlog is not None else 'an unknown number of'} messages of lane {lane} left "
                    "(are its producers still sending? is a broker down?)")
        self.gray_state.flip_to_normal()
        if not self.member.report(None, ClientState.NORMAL):
            log.warning("spark job %s: name server unreachable; the heartbeat will report normal", self.client_id)
        log.info("spark job %s: lane %s drained, now normal", self.client_id, lane)
        self.query = self._start_query(None, self.trigger)

    def _become_lane(self) -> None:
        log.info("spark job %s: normal -> lane %s (no drain needed)", self.client_id, self.flip.lane)
        self._stop_query()
        self.flip.became_gray()
        self.member.report(self.lane, ClientState.GRAY)
        self.query = self._start_query(self.lane, self.trigger)

    def _run_available_now(self, deadline: float, lane: str | None) -> bool:
        """One ``availableNow`` run on the lane's checkpoint; True when it finished, without error, in time."""
        query = self._start_query(lane, {"availableNow": True})
        try:
            if query.awaitTermination(max(1.0, deadline - time.monotonic())):
                return True
            query.stop()
        except StreamingQueryException as exc:  # the drain checks the backlog and runs again
            log.warning("spark job %s: availableNow run failed: %s", self.client_id, exc)
        self._commit_processed(query)
        return False

    # -- queries -----------------------------------------------------------------------------
    def _start_query(self, lane: str | None, trigger: Mapping[str, Any]) -> Any:
        """The query reading ``lane`` (None: base) on its checkpoint, writing on the side ``_writes_lane`` gives."""
        options = {key: value for key, value in self.options.items() if key.lower() not in ("grayflag", "lane")}
        options.update(side_options(lane))
        frame = self.spark.readStream.format(GraymqDataSource.name()).options(**options).load()
        writes = self._writes_lane(lane)
        writer = self._sink(self.pipeline(frame, side_mark(writes is not None, writes)), writes)
        writer = writer.option("checkpointLocation", self.checkpoint(lane))
        query = (writer.trigger(**trigger) if trigger else writer).start()
        log.info("spark job %s: %s query started", self.client_id, f"lane {lane}" if lane else "normal")
        return query

    def _writes_lane(self, lane: str | None) -> str | None:
        """The lane of the writes of a query reading ``lane`` (None: base): ``lane``, or with a producer group, the
        lane that group's flag gives the job's producer (which declares ``lane``)."""
        if self.producer is None:
            return lane
        self.producer.declare(lane)
        return self.producer.side(lane)

    def _sink(self, writer: Any, writes: str | None) -> Any:
        """With a producer group: the sink sends in lane ``writes`` (None: base) in it, its tasks unregistered;
        reported now."""
        if self.producer is None:
            return writer
        if not self.producer.report_writing(writes):
            log.warning("spark job %s: name server unreachable; the heartbeat will report the side", self.client_id)
        writer = writer.option("producerGroup", self.producer_group).option("registerProducer", "false")
        for key, value in side_options(writes).items():
            writer = writer.option(key, value)
        return writer

    def _stop_query(self) -> None:
        """Stop the query between micro-batches: one interrupted inside the sink spills Java stack traces.

        Waits up to ``stop_grace_s`` for a running batch to end, not for a gap between triggers: when batches run
        back to back (they take longer than the trigger's interval), the next trigger starts as the last one ends,
        and it is stopped while it asks the source for offsets, before it writes them to the checkpoint. Stopping
        mid-batch after the grace loses nothing: the job replays the batch from its checkpoint harmlessly (the sink
        is idempotent per batch id), but a job taking the side over from the group's offsets stores its rows again.
        """
        query = self.query
        if query is None:
            return
        deadline = time.monotonic() + self.stop_grace_s
        while query.isActive and running_batch(query.status):
            if time.monotonic() > deadline:
                log.warning("spark job %s: stopping the query inside a micro-batch after %.0f s; rows it stored "
                            "may be read again by a job taking its side over", self.client_id, self.stop_grace_s)
                break
            time.sleep(0.05)
        query.stop()
        self.query = None
        self._commit_processed(query)

    def _commit_processed(self, query: Any) -> None:
        """Commit the end of the last micro-batch of ``query`` (stopped) to the brokers, where the group's offsets
        are behind it. Its source commits a batch's end only when Spark plans the next batch, so a job taking the
        side over from the group's offsets would read the last batch again, all of it when the last
        ``availableNow`` run of a retire could not start (a Python worker that did not connect back in time on a
        busy machine). A failure is logged: the job stops all the same."""
        offsets = processed_offsets(query.lastProgress, self.source.topics)
        if not offsets or self.member is None:
            return
        try:
            self.member.commit_processed(offsets)
        except Exception as exc:  # noqa: BLE001 - the job still stops and unregisters; the next owner reads again
            log.warning("spark job %s: the end of its last micro-batch was not committed (%s: %s); a job taking its "
                        "side over reads that batch again", self.client_id, type(exc).__name__, exc)


# Spark's status messages (``StreamingQuery.status``) while a micro-batch runs, from writing its offsets to the
# checkpoint until its trigger ends; between batches and while a trigger asks its sources for offsets, it says
# "Waiting for ..." or "Getting offsets from ...".
BATCH_MESSAGES = frozenset({"Writing offsets to log", "Processing new data", "No new data but cleaning up state"})


def running_batch(status: Mapping[str, Any]) -> bool:
    """Whether the query of ``status`` is running a micro-batch (a trigger planning one is not)."""
    return bool(status["isTriggerActive"]) and status["message"] in BATCH_MESSAGES
