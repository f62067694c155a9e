"""A client command started before its cluster is up (a README block pasted whole: `graymq up &` and the next lines
at once) says so and waits, within GRAYMQ_NAMESERVER_WAIT_S, instead of failing with a ConnectError; `gray status
--wait-for N` waits for N consumers to hold queues. On real processes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graymq.devkit.ports import free_port
from tests.support.cli import graymq, start_consumer

pytestmark = pytest.mark.integration


def cli(*args: str, wait_s: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "graymq.gray_controller.cli", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "GRAYMQ_NAMESERVER_WAIT_S": wait_s})


def test_topic_create_started_before_the_cluster_waits_for_it(graymq_process, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    create = cli("topic", "create", "T_EARLY", "--queues", "4", "--nameserver", url, wait_s="120")
    assert create.stderr is not None
    line = create.stderr.readline()  # what it says before waiting (empty if it exited instead)
    assert f"name server {url} is not answering yet" in line and "waiting up to 120 s" in line, line
    assert create.poll() is None, create.communicate()
    graymq_process("up", "--data", str(tmp_path / "data"), "--nameserver-port", str(port), "--broker-port", "0",
                   "--grpc-port", "off", timeout=90)
    out, err = create.communicate(timeout=120)
    assert create.returncode == 0, err
    assert "served by broker-a" in out, out


def test_the_wait_is_bounded_and_then_the_command_fails_in_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    out, err = cli("produce", "T", "--body", "x", "--nameserver", url, wait_s="0.5").communicate(timeout=60)
    assert "not answering yet" in err and "waiting up to 0.5 s" in err, err
    assert "Traceback" not in err and "ConnectError" in err, err


def test_status_wait_for_waits_until_the_consumers_hold_queues(cluster, graymq_process) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic("T_WAIT", 4, 2)
    ns = cluster.ns_url
    start_consumer(graymq_process, ns, "G_WAIT", "v1", "T_WAIT")
    start_consumer(graymq_process, ns, "G_WAIT", "v2", "T_WAIT")
    status = graymq(ns, "gray", "status", "G_WAIT", "--wait-for", "2", "--json")
    holding = [c for c in json.loads(status.stdout)["clients"] if c["queues"]]
    assert len(holding) == 2, status.stdout
    refused = graymq(ns, "gray", "status", "G_WAIT", "--wait-for", "3", "--wait-timeout", "1", check=False)
    assert refused.returncode == 1 and "2 of the 3 consumer(s) of G_WAIT awaited hold queues" in refused.stderr, \
        refused.stderr


def test_route_wait_replicas_waits_for_a_broker_not_routed_yet(cluster, graymq_process) -> None:
    """A route with no live broker yet (the README's Replication block: `graymq up &` on a data directory used
    before, and the route read at once, a broker listed a moment before): `--wait-replicas` waits for a broker to
    serve the topic rather than failing on the "no live broker" answer; with none the wait ends in that one line."""
    cluster.create_topic("T_REPL_WAIT", 4, 1)
    cluster.add_broker("broker-a").terminate()
    ns = cluster.ns_url
    for _ in range(60):  # the broker unregistered: the route is refused
        refused = graymq(ns, "topic", "route", "T_REPL_WAIT", "--wait-replicas", "1", "--wait-timeout", "0.5",
                         check=False)
        if "no live broker serves topic T_REPL_WAIT" in refused.stderr:
            break
        time.sleep(0.5)
    assert refused.returncode == 1 and "no live broker serves topic T_REPL_WAIT" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    route = cli("topic", "route", "T_REPL_WAIT", "--wait-replicas", "1", "--wait-timeout", "90", "--json",
                "--nameserver", ns, wait_s="0")  # past the wait for a registered broker: what the route waits
    assert route.stderr is not None
    assert "waiting for 1 replica(s) to serve T_REPL_WAIT" in route.stderr.readline()
    cluster.add_broker("broker-a")
    out, err = route.communicate(timeout=120)
    assert route.returncode == 0, err
    assert [b["broker_name"] for b in json.loads(out)["brokers"]] == ["broker-a"], out


def test_produce_without_a_body_on_a_terminal_says_it_reads_lines() -> None:
    leader, follower = pty.openpty()
    produce = subprocess.Popen([sys.executable, "-m", "graymq.gray_controller.cli", "produce", "T", "--nameserver",
                                f"http://127.0.0.1:{free_port()}"], stdin=follower, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "GRAYMQ_NAMESERVER_WAIT_S": "0"})
    try:
        assert produce.stderr is not None
        first = produce.stderr.readline()
    finally:
        produce.kill()
        produce.communicate()
        os.close(leader)
        os.close(follower)
    assert first == "graymq produce: no --body or --count: each line typed is sent as a message; Ctrl-D ends\n", first
