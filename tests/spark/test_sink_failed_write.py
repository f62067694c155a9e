"""A batch ``df.write`` that fails half way, as a user running a plain PySpark script sees it: one line on stderr
with the rows the write stored (counted on the brokers, the cancelled tasks' rows included) and the ``writeId``
whose re-run stores only the rest — whether a task fails in the sink (a broker refuses a row) or outside it (a UDF
raises in one partition after the other was stored)."""

from __future__ import annotations

import doctest
import os
import select
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from graymq.broker_ext.processors.producer_table import sequence_property
from graymq.client.spark import sink_tally
from graymq.client.spark.sink import SinkCommit
from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.sink_tally import count_stored, failed_write_line, mark_write, request_rows
from graymq.client.spark.sink_task import PartitionWriter, TaskIdentity
from tests.spark.failed_write_job import WRITE_IDS
from tests.spark.helpers import OWN_SPARK_PROCESS
from tests.support.stock_reads import stored_messages

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
TOPICS = {"refused": "SINK_FAILED_REFUSED", "udf": "SINK_FAILED_UDF"}
COUNTED = "SINK_FAILED_COUNTED"
QUEUES = 4
EVERY_ROW_ONCE = {f"r{n}": 1 for n in range(200)}


def stored_bodies(ns_url: str, topic: str) -> Counter[str]:
    """How often each body is stored in ``topic``, read by stored position (each position once)."""
    messages = stored_messages(ns_url, topic, QUEUES, 0, 0)
    assert len({(m.queue_id, m.queue_offset) for m in messages}) == len(messages)
    return Counter(m.body.decode() for m in messages)


def next_line(job: subprocess.Popen[str], timeout: float) -> str:
    """The job's next status line on stdout (FAILED / STORED / DONE)."""
    assert job.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([job.stdout], [], [], deadline - time.monotonic())[0]:
            line = job.stdout.readline()
            if not line:
                raise AssertionError(f"the job ended (exit code {job.wait(30)})")
            if line.startswith(("FAILED ", "STORED ", "DONE ")):
                return line.strip()
    raise AssertionError(f"no status line from the job within {timeout}s")


@OWN_SPARK_PROCESS
def test_a_failed_write_prints_what_it_stored_and_a_rerun_with_its_write_id_stores_only_the_rest(cluster, tmp_path):
    cluster.add_broker("broker-a", GRAYMQ_BROKER_MAX_MESSAGE_SIZE="1000")
    for topic in TOPICS.values():
        cluster.create_topic(topic, QUEUES, 0)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
    stderr_path = tmp_path / "job.stderr"
    with open(stderr_path, "w") as stderr:
        job = subprocess.Popen([sys.executable, "-m", "tests.spark.failed_write_job", cluster.ns_url, *TOPICS.values()],
                               cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                               env=env, start_new_session=True)
    assert job.stdin is not None
    stored_by_failure: dict[str, int] = {}
    try:
        for case, topic in TOPICS.items():
            failure = next_line(job, 180)
            assert failure.startswith(f"FAILED {case}: "), failure
            stored_by_failure[case] = sum(stored_bodies(cluster.ns_url, topic).values())
            if case == "refused":  # the failed task's own error says what it stored
                assert (f"partition 1 of batch 0 stopped after 50 of its rows were stored (write or query id "
                        f"{WRITE_IDS[case]}): message body of 5000 bytes exceeds 1000 bytes") in failure
            else:
                assert "enrichment failed on row 150" in failure
            job.stdin.write("go\n")
            job.stdin.flush()
            assert next_line(job, 120) == f"DONE {case}"
            assert stored_bodies(cluster.ns_url, topic) == EVERY_ROW_ONCE, "the re-run stored only the rest"
        assert job.wait(60) == 0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
    lines = stderr_path.read_text().splitlines()
    for case in TOPICS:
        write_id = WRITE_IDS[case]
        said = [line for line in lines if line.startswith(f"graymq write {write_id} failed: ")]
        assert said == [f"graymq write {write_id} failed: {stored_by_failure[case]} rows stored (counted on the "
                        f"brokers); save() again with the option writeId={write_id} (within 5 minutes) to store only "
                        f"the rest"], lines[-40:]
    assert stored_by_failure["refused"] >= 50, "partition 1's first 50 rows"
    assert stored_by_failure["udf"] >= 100, "partition 0's rows, stored before the UDF raised"


def test_only_the_writes_own_requests_are_counted_and_a_write_to_column_topics_says_what_it_cannot_count():
    producer_id = TaskIdentity("w", 0, 1).producer_id
    assert request_rows(sequence_property(producer_id, 3, 10), {producer_id}) == 10
    assert request_rows(sequence_property(producer_id + 1, 3, 10), {producer_id}) == 0
    assert request_rows("not:a:number", {producer_id}) == 0
    assert doctest.testmod(sink_tally).failed == 0
    options = SinkOptions.parse({"nameserver": "http://127.0.0.1:1"})  # rows name their topics: no marks
    assert mark_write(options) is None
    line = failed_write_line(options, None, "w", [SinkCommit(0, 7), None])
    assert line == ("graymq write w failed: the 1 of 2 tasks that finished stored 7 rows, the others an unknown "
                    "number (rows that name their own topic are not counted); save() again with the option "
                    "writeId=w (within 5 minutes) to store only the rest")


def test_the_count_is_what_the_writes_tasks_stored_after_the_mark_and_nobody_elses(cluster):
    cluster.add_broker("broker-a")
    cluster.create_topic(COUNTED, QUEUES, 2)
    options = SinkOptions.parse({"nameserver": cluster.ns_url, "topic": COUNTED, "batchMaxMessages": "7"})
    columns = SinkColumns.check(StructType([StructField("body", StringType())]), COUNTED)

    def task(write_id: str, partition: int, rows: int) -> None:
        PartitionWriter(options, columns, TaskIdentity(write_id, 0, partition)).write([("r",)] * rows)

    task("w", 1, 5)  # an earlier attempt of the write: stored before the mark
    marks = mark_write(options)
    task("w", 0, 30)
    task("w", 2, 11)
    task("other", 1, 9)  # another write to the same topic meanwhile
    task("w", 1, 5)  # the earlier attempt's rows again: recognised, not stored again
    assert count_stored(options, marks, "w", 3) == 41
