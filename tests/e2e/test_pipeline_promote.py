"""Promote across a two-stage pipeline while its producers keep sending, with graymq's own clients.

v1/v2 producers (producer group PIPE_IN) → topic PIPE_A → group STAGE, whose v1 and v2 consumers re-send each
message to PIPE_B through a producer of group STAGE_OUT (the handled message's gray mark decides the side, as
long as the release honours it) → topic PIPE_B → group SINK (v1 and v2 ``graymq consume`` processes). A rule
``version=v2`` makes v2 gray in PIPE_IN, STAGE and SINK. ``graymq gray promote STAGE --producer-group PIPE_IN
--then SINK`` promotes STAGE, then SINK, whose promote drains what STAGE wrote to PIPE_B's gray queues.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from typing import Any

import pytest

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.devkit.processes import GraymqProcess
from tests.support.cli import FAST_HEARTBEAT, graymq, json_lines, start_consumer, wait_for
from tests.support.clients import FAST, run_scenario, wait_until

pytestmark = pytest.mark.e2e
TOPIC_A, TOPIC_B = "PIPE_A", "PIPE_B"
SOURCE, STAGE, STAGE_OUT, SINK = "PIPE_IN", "STAGE", "STAGE_OUT", "SINK"
COUNT = 600  # per producer


class Relay:
    """A STAGE consumer (label version=``version``) passing each message on to PIPE_B, keyed by its PIPE_A msg id."""

    def __init__(self, ns: str, version: str) -> None:
        self.sent: list[dict[str, Any]] = []
        self.producer = Producer(STAGE_OUT, ns, client_id=f"out-{version}", heartbeat_interval_s=0.5)
        self.consumer = PushConsumer(STAGE, ns, listener=self.on_messages, client_id=f"stage-{version}",
                                     labels={"version": version}, consume_from="first", **FAST)  # type: ignore[arg-type]
        self.consumer.subscribe(TOPIC_A, "*")

    async def on_messages(self, messages: list[MessageExt]) -> ConsumeStatus:
        for m in messages:
            r = await self.producer.send(Message(TOPIC_B, m.body, keys=[m.msg_id]))
            self.sent.append({"key": m.msg_id, "gray": r.gray, "handled_gray": m.gray})
        return ConsumeStatus.CONSUME_SUCCESS

    async def start(self) -> None:
        await self.producer.start()
        await self.consumer.start()

    async def stop(self) -> None:
        await self.consumer.stop()
        await self.producer.stop()


def start_source(graymq_process, ns: str, version: str) -> GraymqProcess:
    return graymq_process("produce", TOPIC_A, "--group", SOURCE, "--label", f"version={version}", "--count",
                          str(COUNT), "--size", "48", "--interval", "0.005", "--json", "--client-id",
                          f"source-{version}", "--nameserver", ns, *FAST_HEARTBEAT, wait=False)


def sent_to_a(*producers: GraymqProcess) -> dict[str, dict[str, Any]]:
    return {s["msg_id"]: s for p in producers for s in json_lines(p) if s.get("status") == "SEND_OK"}


def consumed_keys(sinks: dict[str, GraymqProcess]) -> Counter[str]:
    return Counter(key for p in sinks.values() for m in json_lines(p) for key in m["keys"])


@pytest.fixture
def pipeline(cluster, graymq_process):
    """Topics with two gray queues each, the v2 rules, the SINK consumers and the STAGE relays (not started)."""
    cluster.add_broker("broker-a")
    for topic in (TOPIC_A, TOPIC_B):
        cluster.create_topic(topic, 4, 2)
    for group in (SOURCE, STAGE, SINK):
        cluster.ns_call(lambda ns, g=group: ns.add_rule(g, {"version": "v2"}, True))
    ns = cluster.ns_url
    sinks = {cid: start_consumer(graymq_process, ns, SINK, cid, TOPIC_B, "*", "--label", f"version={cid[-2:]}",
                                 *FAST_HEARTBEAT)
             for cid in ("sink-v1", "sink-v2")}
    return cluster, sinks


def run_pipeline(cluster, sinks: dict[str, GraymqProcess], graymq_process, *operation: str) -> dict[str, Any]:
    """Producers sending, ``graymq gray OPERATION STAGE --producer-group PIPE_IN --then SINK`` once gray messages
    flow through STAGE; returns the report, what reached PIPE_A, what STAGE relayed and the gray clients left."""
    ns = cluster.ns_url
    relays = [Relay(ns, "v1"), Relay(ns, "v2")]
    outcome: dict[str, Any] = {}

    async def scenario() -> None:
        for relay in relays:
            await relay.start()
        try:
            sources = [start_source(graymq_process, ns, "v1"), start_source(graymq_process, ns, "v2")]
            await wait_until(lambda: sum(s["gray"] for s in relays[1].sent) > 50, 60, "gray messages through STAGE")
            result = await asyncio.to_thread(graymq, ns, "gray", *operation, STAGE, "--producer-group", SOURCE,
                                             "--then", SINK, "--timeout", "60", "--json", timeout=90)
            outcome["report"] = json.loads(result.stdout)
            for p in sources:
                await asyncio.to_thread(p.proc.wait, 90)
            sent = outcome["sent"] = sent_to_a(*sources)
            await wait_until(lambda: set(sent) <= {s["key"] for r in relays for s in r.sent}, 60, "STAGE relayed all")
            outcome["relayed"] = Counter(s["key"] for r in relays for s in r.sent)
            outcome["gray_left"] = {group: [c.client_id for c in (await asyncio.to_thread(
                cluster.ns_call, lambda c, g=group: c.group_clients(g))).clients if c.gray]
                for group in (SOURCE, STAGE, STAGE_OUT, SINK)}
        finally:
            for relay in relays:
                await relay.stop()

    run_scenario(scenario, timeout=200)
    return outcome


def check_end_to_end(outcome: dict[str, Any], sinks: dict[str, GraymqProcess]) -> list[dict[str, Any]]:
    """Every PIPE_A message reached SINK once (counted by key), STAGE handled each once, gray ones reached v2 only;
    returns what SINK consumed."""
    sent = outcome["sent"]
    assert len(sent) == 2 * COUNT and any(s["gray"] for s in sent.values())
    wait_for(lambda: set(sent) <= set(consumed_keys(sinks)), 60, "every message at SINK")
    for p in sinks.values():
        assert p.terminate() == 0, p.output[-2000:]
    keys = consumed_keys(sinks)
    lost = set(sent) - set(keys)
    doubled = {k: n for k, n in keys.items() if n > 1}
    assert not lost and not doubled, f"{len(lost)} lost, {len(doubled)} consumed twice at SINK"
    assert not [k for k, n in outcome["relayed"].items() if n > 1], "STAGE handled a message twice"
    at_sink = [m for p in sinks.values() for m in json_lines(p)]
    assert any(m["gray"] for m in at_sink)
    assert all(m["client_id"] == "sink-v2" for m in at_sink if m["gray"]), "a gray message reached v1 at SINK"
    return at_sink


def test_promote_across_a_pipeline_under_load_loses_and_doubles_nothing(pipeline, graymq_process):
    cluster, sinks = pipeline
    outcome = run_pipeline(cluster, sinks, graymq_process, "promote")
    report = outcome["report"]
    assert report["state"] == "SUCCEEDED" and report["groups_done"] == [STAGE, SINK], report
    first, second = report["stages"]
    assert first["consumers_flipped"] == ["stage-v2"] and "source-v2" in " ".join(first["producers_flipped"])
    assert second["consumers_flipped"] == ["sink-v2"] and second["gray_backlog"] == 0
    at_sink = check_end_to_end(outcome, sinks)
    assert not any(outcome["gray_left"].values()), outcome["gray_left"]
    print(f"pipeline promote: sent {len(outcome['sent'])} ({sum(s['gray'] for s in outcome['sent'].values())} "
          f"gray), {sum(m['gray'] for m in at_sink)} gray at SINK, stage timings "
          f"{[s['timings_s'] for s in report['stages']]}")


def test_rollback_across_a_pipeline_under_load_drains_every_stage(pipeline, graymq_process):
    """Rollback --drain, same order: the v2 consumers of STAGE then SINK finish their gray backlog and stay gray
    (safe to stop); no producer is left gray."""
    cluster, sinks = pipeline
    outcome = run_pipeline(cluster, sinks, graymq_process, "rollback", "--drain")
    report = outcome["report"]
    assert report["state"] == "SUCCEEDED" and report["groups_done"] == [STAGE, SINK], report
    assert [(s["gray_backlog"], s["gray_consumers_left"]) for s in report["stages"]] == [
        (0, ["stage-v2"]), (0, ["sink-v2"])]
    check_end_to_end(outcome, sinks)
    assert outcome["gray_left"] == {SOURCE: [], STAGE: ["stage-v2"], STAGE_OUT: [], SINK: ["sink-v2"]}


@pytest.fixture
def stuck_sink(cluster, graymq_process):
    """STAGE with a gray rule and nothing else; SINK with a normal consumer of PIPE_B, whose gray queues hold 5
    messages no gray consumer will take (orphan policy hold): SINK's promote waits on them."""
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC_B, 4, 2)
    ns = cluster.ns_url
    cluster.ns_call(lambda c: c.add_rule(STAGE, {"version": "v2"}, True))
    start_consumer(graymq_process, ns, SINK, "sink-v1", TOPIC_B, "*", "--label", "version=v1")
    graymq(ns, "produce", TOPIC_B, "--group", STAGE_OUT, "--gray", "--count", "5", "--json")
    return cluster


def test_a_failed_stage_stops_the_pipeline_and_says_what_is_done(stuck_sink):
    """SINK's promote times out after STAGE's succeeded; an unknown group is refused before anything starts."""
    cluster = stuck_sink
    ns = cluster.ns_url
    unknown = graymq(ns, "gray", "promote", STAGE, "--then", "NO_SUCH_GROUP", check=False)
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines() == [
        "graymq gray: group NO_SUCH_GROUP is not known to the name server"], unknown.stderr
    assert cluster.ns_call(lambda c: c.list_cutovers(STAGE)) == []  # nothing started

    failed = graymq(ns, "gray", "promote", STAGE, "--then", SINK, "--timeout", "2", "--json", check=False)
    assert failed.returncode == 1, failed.stderr
    report = json.loads(failed.stdout)
    assert (report["state"], report["groups_done"], report["groups_left"]) == ("FAILED", [STAGE], [SINK])
    assert [(s["group"], s["state"]) for s in report["stages"]] == [(STAGE, "SUCCEEDED"), (SINK, "FAILED")]
    assert report["stages"][0]["rules_removed"] and "gray backlog 5" in report["message"], report["message"]

    text = graymq(ns, "gray", "rollback", STAGE, "--then", SINK, "--timeout", "2", check=False)
    lines = text.stdout.splitlines()
    assert text.returncode == 1 and lines[-1] == f"pipeline rollback FAILED: done: {STAGE}; not done: {SINK}", lines
    assert lines[0].startswith("stage 1/2: rollback #") and f"of {STAGE} SUCCEEDED" in lines[0], lines
    assert any(line.startswith("stage 2/2: rollback #") and f"of {SINK} FAILED" in line for line in lines), lines


def test_an_interrupted_pipeline_says_where_and_the_same_command_resumes_it(stuck_sink, graymq_process):
    cluster = stuck_sink
    ns = cluster.ns_url
    controller = graymq_process("gray", "promote", STAGE, "--then", SINK, "--timeout", "60", "--nameserver", ns,
                                wait=False, env={"GRAYMQ_ADMIN_TOKEN": "dev-token"})
    controller.wait_for_line(f"stage 2/2: promote {SINK}", timeout=60)
    wait_for(lambda: bool(cluster.ns_call(lambda c: c.list_cutovers(SINK, state="RUNNING"))), 30, "SINK's promote")
    controller.proc.send_signal(signal.SIGINT)
    assert controller.proc.wait(30) == 130
    controller.wait_for_line(f"interrupted at {SINK}: done: {STAGE}; not done: {SINK}; the same command resumes it")
    running = cluster.ns_call(lambda c: c.list_cutovers(SINK, state="RUNNING"))
    assert len(running) == 1

    cluster.ns_call(lambda c: c.set_orphan_policy(SINK, "adopt"))  # the normal consumer takes the gray backlog
    result = graymq(ns, "gray", "promote", STAGE, "--then", SINK, "--timeout", "60", "--json")
    report = json.loads(result.stdout)
    assert report["state"] == "SUCCEEDED" and report["groups_left"] == [], report
    assert report["stages"][0]["nothing_to_promote"]
    resumed = report["stages"][1]
    assert (resumed["operation_id"], resumed["resumed"], resumed["gray_backlog"]) == (running[0].id, True, 0)
