"""A group's gray switch reaches every consumer of a process through the instance's watch, in the round that carries
it: also a consumer whose last heartbeat failed (it stays watched) and one that changed after the round was sent
(the answer is stale for its own flag, not for its group's settings). A gray consumer that went normal following a
switch-off turns gray again with the switch-on that the round sent after the switch-off's answer carries: its flip
followed that answer, so it leaves the round fresh.

The consumers heartbeat the name server once every two minutes and every heartbeat of theirs fails once the test
cuts them, so a switch seen within the test's wait can only have come through the watch.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client import PushConsumer
from graymq.client.config import ClientConfig
from graymq.client.instance import ClientInstance
from graymq.nameserver_api.session import PATH, WATCHES_PATH
from graymq.protocol.errors import NameServerError
from tests.support.clients import FAST, Recorder, run_scenario, wait_until

pytestmark = pytest.mark.integration
GROUP = "GID_SWITCH_ROUND"
TOPIC = "TOPIC_SWITCH_ROUND"
RARE_S = 120.0  # heartbeat interval to the name server: longer than any wait below
PUSHED_S = 20.0


class CutHeartbeats:
    """The instance's requests to the name server: a heartbeat request carrying a client of ``cut`` fails (as when
    no name server answers it); the client ids of each watch round sent are recorded in ``rounds``."""

    def __init__(self, instance: ClientInstance) -> None:
        self.cut: set[str] = set()
        self.rounds: list[set[str]] = []
        self.hold: asyncio.Event | None = None  # a watch round sent while it is not set waits for it
        request = instance.nameserver.request

        def beating(body: dict[str, Any]) -> set[str]:
            """The client ids a heartbeat request carries: in full, alive by key or by id."""
            by_id = {acked.alive_id: key[1] for key, acked in instance.session._acked.items()}
            return ({b["client_id"] for b in [*body["heartbeats"], *body.get("alive", [])]}
                    | {by_id[alive_id] for alive_id in body.get("alive_ids", ())})

        async def cutting(method: str, path: str, **kwargs: Any) -> Any:
            body = kwargs.get("json") or {}
            if path == PATH and self.cut & beating(body):
                raise NameServerError(f"{method} {path}: cut by the test")
            if path == WATCHES_PATH:
                self.rounds.append({watch["client_id"] for watch in body["watches"]})
                if self.hold is not None:
                    await self.hold.wait()
            return await request(method, path, **kwargs)

        instance.nameserver.request = cutting  # type: ignore[method-assign]


def consumer(config: ClientConfig, client_id: str, gray: bool = False) -> PushConsumer:
    c = PushConsumer(GROUP, config=config, listener=Recorder().listener(client_id), client_id=client_id, gray=gray,
                     **{**FAST, "nameserver_interval_s": RARE_S})  # type: ignore[arg-type]
    c.subscribe(TOPIC, "*")
    return c


def test_a_switch_on_reaches_every_consumer_of_a_process_through_its_watch_round_with_heartbeats_failing(
        cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 1)

    async def scenario() -> None:
        admin = cluster.admin()
        await admin.set_switch(GROUP, False, "test")
        config = ClientConfig.from_env(cluster.ns_url)
        consumers = [consumer(config, f"c{i}") for i in range(4)]
        cut = CutHeartbeats(consumers[0].client)
        try:
            for c in consumers[:2]:
                await c.start()
            cut.cut |= {"c0", "c1"}
            for c in consumers[:2]:
                await c.membership.stop()  # no more heartbeats of theirs (one failing would fail c2's and c3's too)
                assert await c.membership.beat() is None  # failed: the name server did not hear it
            for c in consumers[2:]:
                await c.start()  # a new round of watches
            await wait_until(lambda: bool(cut.rounds) and {"c2", "c3"} <= cut.rounds[-1], PUSHED_S,
                             "a round of watches with c2 and c3")
            cut.cut |= {"c2", "c3"}
            for c in consumers[2:]:
                c.membership.changed()  # a change of their own after the round was sent: its answer is stale
            assert not any(c.gray_switch for c in consumers)

            await admin.set_switch(GROUP, True, "test")
            await wait_until(lambda: all(c.gray_switch for c in consumers), PUSHED_S,
                             "every consumer seeing the switch on")
        finally:
            cut.cut.clear()
            await admin.close()
            for c in consumers:
                await c.stop()

    run_scenario(scenario, timeout=90)


def slow_brokers(c: PushConsumer, delay_s: float) -> None:
    """``c``'s heartbeats to the brokers take ``delay_s`` longer (as under a fleet's load): acting on an answer, it
    changes well after the next round of watches went out."""
    beat = c.heartbeats.beat

    async def slow() -> Any:
        await asyncio.sleep(delay_s)
        return await beat()

    c.heartbeats.beat = slow  # type: ignore[method-assign]


def test_a_switch_on_turns_gray_a_consumer_that_followed_the_switch_off_through_the_round_sent_since(
        cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 1)

    async def scenario() -> None:
        admin = cluster.admin()
        await admin.set_switch(GROUP, True, "test")
        gray = consumer(ClientConfig.from_env(cluster.ns_url), "g0", gray=True)
        cut = CutHeartbeats(gray.client)
        try:
            await gray.start()
            await wait_until(lambda: gray.lane == "gray" and not gray.membership.report_changed(), PUSHED_S,
                             "g0 gray and reported")
            slow_brokers(gray, 0.5)
            cut.hold = asyncio.Event()
            rounds = len(cut.rounds)
            await admin.set_switch(GROUP, False, "test")
            await wait_until(lambda: gray.lane is None and not gray.membership.report_changed(), PUSHED_S,
                             "g0 normal (following the switch-off) and reported")
            assert len(cut.rounds) == rounds + 1, "the round after the switch-off's answer went out before g0 flipped"
            cut.cut.add("g0")  # no heartbeat of g0's is heard from now on: only the watch can carry the switch-on
            cut.hold.set()
            await admin.set_switch(GROUP, True, "test")
            await wait_until(lambda: gray.lane == "gray", PUSHED_S, "g0 gray again through the watch")
        finally:
            cut.cut.clear()
            if cut.hold is not None:
                cut.hold.set()
            await admin.close()
            await gray.stop()

    run_scenario(scenario, timeout=90)
