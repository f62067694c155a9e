"""The example job as a user runs it: loopback only, no UI, and Ctrl-C during a batch ends it quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graymq.client import Message
from graymq.client.sync import SyncProducer
from tests.spark.helpers import OWN_SPARK_PROCESS, poll_until

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
TOPIC = "SPARK_EXAMPLE_CTRL_C"


@OWN_SPARK_PROCESS
def test_ctrl_c_during_the_first_batch_finishes_it_and_prints_no_stack_traces(cluster, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    producer = SyncProducer("ORDER_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        for i in range(300):
            producer.send(Message(TOPIC, json.dumps({"order_id": f"o{i}", "amount": 1.5, "status": "PAID"}).encode()))
    finally:
        producer.stop()
    log_path = tmp_path / "job.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
    with open(log_path, "w") as log:
        job = subprocess.Popen(
            [sys.executable, "-m", "jobs.order_minute_stats", "run", "--nameserver", cluster.ns_url, "--topic", TOPIC,
             "--group", "ORDER_STATS_EXAMPLE", "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"),
             "--normal"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        # Spark writes the offsets of batch 0 when the batch begins, before the sink runs
        poll_until(lambda: (tmp_path / "cp" / "normal" / "offsets" / "0").exists(), 120, "the first batch to begin")
        os.killpg(job.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        assert job.wait(120) == 0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "Traceback" not in output
    assert "\tat " not in output and "Exception in thread" not in output, output[-3000:]
    assert "stopping after the running micro-batch" in output
    assert (tmp_path / "cp" / "normal" / "commits" / "0").exists(), "the first batch was not finished"
    assert list((tmp_path / "out" / "stats" / "side=normal").glob("batch=*"))


def test_the_example_binds_loopback_with_no_ui_unless_the_submitted_conf_says_otherwise(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.uiWebUrl is None


def test_report_without_figures_is_one_line_not_a_traceback(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "jobs.order_minute_stats", "report", "--output",
                             str(tmp_path / "out-v2")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == (
        f"order_minute_stats: no figures in {tmp_path}/out-v2/stats yet: the job writes them with its first "
        f"micro-batch that got messages (is `run --output {tmp_path}/out-v2` running, and were messages sent to its "
        "side?)"), result.stderr
