"""What a new user reads from the `graymq` CLI: quiet logs, one clear line per mistake, readable output,
an interrupted promote that says how to resume, help that names the environment, a small local cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.support.cli import graymq, held_queues, produce, start_consumer, wait_for

pytestmark = pytest.mark.integration

DEAD = "http://127.0.0.1:9"  # nothing listens: a command that reaches the network fails differently
MIB = 1 << 20
NAME_RULE = "(1 to 127 characters from a-z A-Z 0-9 % - _ |)"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def start_up(graymq_process, data: Path, **env: str):  # type: ignore[no-untyped-def]
    return graymq_process("up", "--data", str(data), "--nameserver-port", "0", "--broker-port", "0", "--grpc-port", "0",
                          env={"GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.2", **env}, timeout=90)


def wait_for_broker_heartbeats(ns_url: str, count: int) -> None:
    """Until the name server has seen ``count`` distinct broker heartbeats."""
    seen: set[str] = set()

    def more() -> bool:
        brokers = httpx.get(f"{ns_url}/v1/brokers", timeout=5).json()
        seen.update(b["last_heartbeat"] for b in brokers)
        return len(seen) >= count

    wait_for(more, 30, f"{count} broker heartbeats")


# -- logs -------------------------------------------------------------------------------------------

def test_up_logs_no_library_line_per_heartbeat(graymq_process, tmp_path):
    up = start_up(graymq_process, tmp_path / "data")
    wait_for_broker_heartbeats(up.ready_info["nameserver"], 5)
    assert up.terminate() == 0
    assert "INFO graymq.broker_ext.main broker broker-a serving on" in up.output  # graymq's own INFO lines stay
    assert "httpx" not in up.output and "HTTP Request" not in up.output


def test_debug_log_level_shows_library_logs_too(graymq_process, tmp_path):
    up = start_up(graymq_process, tmp_path / "data", GRAYMQ_LOG_LEVEL="DEBUG")
    up.wait_for_line("httpx", timeout=30)


# -- mistakes: one clear line, before any request -------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["topic", "create", "a\tb", "--queues", "4"], "graymq topic: invalid topic name 'a\\tb': '\\t' is not allowed"),
    (["topic", "create", "a b", "--queues", "4"], "graymq topic: invalid topic name 'a b': ' ' is not allowed"),
    (["topic", "create", "", "--queues", "4"], "graymq topic: invalid topic name '': it is empty"),
    (["topic", "route", "T/1"], "graymq topic: invalid topic name 'T/1': '/' is not allowed"),
    (["gray", "status", "a b"], "graymq gray: invalid group name 'a b'"),
    (["gray", "promote", "G", "--producer-group", "p.1"], "graymq gray: invalid group name 'p.1'"),
    (["produce", "a b", "--body", "x"], "graymq produce: invalid topic name 'a b'"),
    (["consume", "T,a b", "--group", "G"], "graymq consume: invalid topic name 'a b'"),
    (["consume", "T", "--group", "G 1"], "graymq consume: invalid group name 'G 1'"),
])
def test_a_bad_name_is_one_line_naming_it_and_the_rule(args, message):
    result = run_cli(*args, "--nameserver", DEAD)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(message) and result.stderr.strip().endswith(NAME_RULE)


def test_a_bad_client_id_is_one_line_naming_it():
    result = run_cli("gray", "flag", "G", "c 1", "on", "--nameserver", DEAD)
    assert result.returncode == 2
    assert result.stderr.startswith("graymq gray: invalid client id 'c 1': ' ' is not allowed")
    assert len(result.stderr.splitlines()) == 1


def test_an_empty_admin_token_is_named_not_taken_for_an_outage():
    result = run_cli("topic", "create", "T", "--queues", "4", "--nameserver", DEAD, env={"GRAYMQ_ADMIN_TOKEN": ""})
    assert result.returncode == 2
    assert result.stderr.startswith("graymq topic: GRAYMQ_ADMIN_TOKEN is set but empty")
    assert len(result.stderr.splitlines()) == 1


def test_name_server_validation_errors_read_as_field_and_message(cluster):
    result = graymq(cluster.ns_url, "topic", "create", "T_422", "--queues", "2000", check=False)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("graymq topic: PUT /v1/topics/T_422: invalid request: queue_nums: Input should be")
    assert "{" not in result.stderr and "'loc'" not in result.stderr


def test_names_travel_percent_encoded_in_url_paths(cluster):
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T%41", "--queues", "2")  # sent raw, %41 would arrive as "A"
    topics = {t["topic"] for t in json.loads(graymq(ns, "topic", "list", "--json").stdout)}
    assert "T%41" in topics and "TA" not in topics


# -- promote interrupted ---------------------------------------------------------------------------

def test_ctrl_c_during_promote_says_it_is_still_running_and_exits_130(cluster):
    ns = cluster.ns_url
    group = "G_INTERRUPTED"
    stop = threading.Event()

    def stuck_gray_consumer() -> None:
        """Heartbeats as a gray consumer that never drains: promote waits for it."""
        with httpx.Client(base_url=ns, timeout=5) as http:
            while not stop.is_set():
                http.post("/v1/clients/heartbeat", json={
                    "group": group, "client_id": "stuck-gray", "role": "consumer", "declared_gray": True,
                    "gray": True, "state": "GRAY"}).raise_for_status()
                stop.wait(0.5)

    def running() -> list[dict]:
        return list(httpx.get(f"{ns}/v1/groups/{group}/cutovers", params={"state": "RUNNING"}, timeout=5).json())

    heartbeats = threading.Thread(target=stuck_gray_consumer, daemon=True)
    heartbeats.start()
    try:
        wait_for(lambda: "stuck-gray" in held_queues(ns, group), 20, "the gray consumer in the name server")
        promote = subprocess.Popen(
            [sys.executable, "-m", "graymq.gray_controller.cli", "gray", "promote", group, "--nameserver", ns],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "GRAYMQ_ADMIN_TOKEN": "dev-token"})
        try:
            wait_for(lambda: [op["step"] for op in running()] == ["drain"], 30, "promote waiting for the drain")
            promote.send_signal(signal.SIGINT)
            out, err = promote.communicate(timeout=30)
        finally:
            promote.kill()
    finally:
        stop.set()
        heartbeats.join(10)
    assert promote.returncode == 130, err
    operation = running()[0]["id"]
    assert f"promote #{operation} of {group} is still running; run the command again to resume" in err.splitlines()
    assert "Traceback" not in err and out == ""


# -- readable output -------------------------------------------------------------------------------

def test_status_flag_and_promote_read_as_text(cluster, graymq_process):
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    cluster.create_topic("T_WIDE", 64, 2)
    graymq(ns, "gray", "switch", "G_TEXT", "on")
    start_consumer(graymq_process, ns, "G_TEXT", "c-gray", "T_WIDE", "*", "--gray")
    start_consumer(graymq_process, ns, "G_TEXT", "c-normal", "T_WIDE")
    wait_for(lambda: len({q for q in held_queues(ns, "G_TEXT").get("c-normal", ()) if ":T_WIDE:" in q}) == 62, 30,
             "the normal consumer holding the 62 normal queues")

    status = graymq(ns, "gray", "status", "G_TEXT").stdout
    row = next(line for line in status.splitlines() if line.startswith("c-normal"))
    assert "broker-a:T_WIDE:1-62" in row and len(row) < 150, row

    flag = graymq(ns, "gray", "flag", "G_TEXT", "c-normal", "auto").stdout
    assert flag.strip() == "G_TEXT/c-normal: explicit flag auto; desired now normal"

    produce(ns, "T_WIDE", "--gray", "--count", "5")
    result = graymq(ns, "gray", "promote", "G_TEXT", "--timeout", "60")
    assert re.fullmatch(r"promote #\d+ of G_TEXT SUCCEEDED in \d+\.\d\d s \(producers \d+\.\d\d s, "
                        r"drain \d+\.\d\d s\)", result.stdout.strip()), result.stdout
    progress = result.stderr.splitlines()
    assert progress.count("producers report normal: no new gray messages") == 1, progress
    assert "" not in progress and all(a != b for a, b in zip(progress, progress[1:], strict=False)), progress


def test_help_names_the_environment_the_defaults_and_stdin():
    def text(*args: str) -> str:
        return " ".join(run_cli(*args, "--help").stdout.split())  # argparse wraps lines anywhere

    for command in ((), ("gray", "promote"), ("topic", "create"), ("produce",), ("consume",)):
        assert all(v in text(*command) for v in ("GRAYMQ_NAMESERVER", "GRAYMQ_ADMIN_TOKEN", "GRAYMQ_LOG_LEVEL"))
    assert "(default: last)" in text("consume")
    up = text("up")
    assert "(default: 9876)" in up and "(default: 10911)" in up and "(default: 64M)" in up
    assert "one per line of stdin" in text("produce")
    assert "GRAYMQ_LOG_LEVEL" in text("broker") and "default 1G" in text("broker")


# -- disk ------------------------------------------------------------------------------------------

def test_up_keeps_a_fresh_cluster_small_on_disk(graymq_process, tmp_path):
    """Allocated blocks (``st_blocks``) are what fills a disk, and the store preallocates its files with
    posix_fallocate, so a fresh cluster costs its files' full size from the first message on. The segment's
    apparent size is checked too: on a filesystem that stores zeros for free, blocks alone would hide it."""
    data = tmp_path / "data"
    up = start_up(graymq_process, data)
    ns = up.ready_info["nameserver"]
    graymq(ns, "topic", "create", "T_DISK", "--queues", "8", "--gray-queues", "2")
    wait_for(lambda: "broker-a" in graymq(ns, "topic", "route", "T_DISK", check=False).stdout, 20, "the route")
    produce(ns, "T_DISK", "--count", "12")
    produce(ns, "T_DISK", "--count", "4", "--gray")
    queues = {p.parent.name for p in (data / "broker-a" / "consumequeue" / "T_DISK").glob("*/*")}
    assert len(queues) == 8  # every queue has its preallocated file

    segments = [p.stat().st_size for p in (data / "broker-a" / "commitlog").iterdir()]
    assert segments == [64 * MIB]
    allocated = sum(p.stat().st_blocks * 512 for p in data.rglob("*") if p.is_file())
    assert allocated < 100 * MIB, f"{allocated / MIB:.0f} MiB on disk"


def test_broker_honours_segment_size_and_a_store_keeps_the_sizes_it_was_written_with(cluster, tmp_path):
    """A store made before `up` got small files (1 GiB segments, 6 MB consume-queue files) still starts."""
    store = tmp_path / "broker-s"
    cluster.add_broker("broker-s", "--segment-size", "2M")
    cluster.create_topic("T_SEG", 1, 0)
    produce(cluster.ns_url, "T_SEG", "--body", "first")
    assert [p.stat().st_size for p in (store / "commitlog").iterdir()] == [2 * MIB]
    assert [p.stat().st_size for p in (store / "consumequeue" / "T_SEG").glob("*/*")] == [300_000 * 20]

    cluster.brokers["broker-s"].terminate()
    restarted = cluster.add_broker("broker-s", "--segment-size", "1M", GRAYMQ_BROKER_CQ_UNITS_PER_FILE="50000")
    restarted.wait_for_line("was written with segment_size=2097152: keeping it")
    restarted.wait_for_line("was written with cq_units_per_file=300000: keeping it")
    produce(cluster.ns_url, "T_SEG", "--body", "second")
    assert [p.stat().st_size for p in (store / "commitlog").iterdir()] == [2 * MIB]
    assert [p.stat().st_size for p in (store / "consumequeue" / "T_SEG").glob("*/*")] == [300_000 * 20]
