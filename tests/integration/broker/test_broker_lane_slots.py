"""A broker applies a topic's lane slots from the name server: it holds the total queue count the name server pushes
(base, gray and every lane slot past the first), keeps ``lane_slots`` in its topic table and reports both back, so
the topic's route shows them, and the name server counts it ready for the configured layout."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.cli import wait_for

pytestmark = pytest.mark.integration


def test_a_broker_holds_and_reports_the_lane_slots_of_a_topic(cluster) -> None:  # type: ignore[no-untyped-def]
    cluster.add_broker("broker-a")
    answer = cluster.ns_call(lambda ns: ns.put_topic_lanes("T_LANES", 8, 2, 3, wait_s=20))
    assert (answer["queue_nums"], answer["lane_slots"], answer["brokers_ready"]) == (8, 3, ["broker-a"])
    route = httpx.get(f"{cluster.ns_url}/v1/topics/T_LANES/route", timeout=5).json()
    [broker] = route["brokers"]
    assert (broker["queue_nums"], broker["gray_queue_nums"], broker["lane_slots"]) == (12, 2, 3)
    stored = json.loads((cluster.root / "broker-a" / "config" / "topics.json").read_text())["topics"]
    [config] = [t for t in stored if t["topic"] == "T_LANES"]
    assert (config["queue_nums"], config["lane_slots"]) == (12, 3)
    cluster.ns_call(lambda ns: ns.put_topic_lanes("T_LANES", 8, 2, 4))

    def grown() -> bool:
        [entry] = httpx.get(f"{cluster.ns_url}/v1/topics/T_LANES/route", timeout=5).json()["brokers"]
        return (entry["queue_nums"], entry["lane_slots"]) == (14, 4)

    wait_for(grown, 30, "the broker serving 4 lane slots")
