"""The fleet bench's stock pods: the SDK's simple consumers and producers start under the pods' host names, the name
server lists every one of them (the gray pod's gray, by the rule on the host), and they all shut down when asked,
no pod killed."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from graymq.bench import bench_fleet
from graymq.bench.fleet_stock import stock_pods, stop_pods
from graymq.bench.graymq_servers import Broker, NameServer

UTS_NAMESPACE = subprocess.run(["unshare", "--uts", "--map-root-user", "true"], capture_output=True).returncode == 0
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not UTS_NAMESPACE, reason="no UTS namespace here (unshare --uts --map-root-user): the stock "
                       "pods need host names of their own"),
]

TOPIC, GROUP = bench_fleet.TOPIC_A, "fleet_s0"
SPECS = [*(("stock_simple", f"s{i}", GROUP, TOPIC, i % 5 == 0) for i in range(6)),
         *(("stock_producer", f"q{i}", TOPIC, TOPIC, i % 5 == 0) for i in range(4))]
PODS = (3, 2, 2, 2, 1)  # clients a pod: the gray pod's s0, s5 and q0, then the seven others in turn


def test_stock_pods_are_listed_with_their_gray_fifth_and_stop_cleanly(tmp_path: Path) -> None:
    with NameServer(tmp_path / "ns", tmp_path).wait_ready() as ns:
        broker = Broker("fleet-a", tmp_path / "fleet-a", tmp_path, nameserver=ns.url, grpc=True,
                        env=bench_fleet.STOCK_BUDGETS).wait_ready()
        try:
            ns.create_topic(TOPIC, 8, 2, {"fleet-a"})
            groups = bench_fleet.stock_groups(SPECS)
            asyncio.run(bench_fleet.stock_rules(ns, groups))
            with stock_pods(broker.grpc_address, SPECS, tmp_path) as pods:
                assert [pod.line(120) for pod in pods] == [{"started": n, "failed": []} for n in PODS]
                deadline = time.monotonic() + 60
                while (listed := asyncio.run(bench_fleet.stock_listed(ns.url, groups))) != (10, 3):
                    assert time.monotonic() < deadline, f"listed (clients, gray): {listed}"
                    time.sleep(0.3)
                said = stop_pods(pods, 60)
                assert said == [{"stopped": n, "receive_errors": 0} for n in PODS]
                assert [pod.proc.returncode for pod in pods] == [0] * len(pods)
        finally:
            broker.stop()
