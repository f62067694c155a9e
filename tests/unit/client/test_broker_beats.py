"""An instance's broker heartbeats: the consumers' data of one loop turn go to a broker in one request, each naming
its consumer; a failed request fails every consumer in it; a consumer leaving waits for its heartbeat on the way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client.broker_beats import BrokerBeats
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import ConnectFailedError

pytestmark = pytest.mark.unit


class FakeBrokers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.sent: list[pb.HeartbeatRequest] = []
        self.fail: Exception | None = None
        self.release = asyncio.Event()
        self.release.set()

    async def heartbeat(self, address: str, req: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        self.calls.append((address, (req.client_id, [(d.group, d.client_id) for d in req.consumers])))
        self.sent.append(req)
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return self.answer

    answer = pb.HeartbeatResponse()

    async def unregister(self, address: str, client_id: str, group: str) -> None:
        self.calls.append((address, ("unregister", client_id, group)))


def data(client_id: str, group: str = "g") -> pb.ConsumerData:
    return pb.ConsumerData(client_id=client_id, group=group)


def test_the_heartbeats_of_one_loop_turn_go_to_each_broker_in_one_request_naming_each_consumer() -> None:
    async def main() -> FakeBrokers:
        brokers = FakeBrokers()
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        await asyncio.gather(*(beats.heartbeat(address, data(c)) for address in ("a", "b") for c in ("c0", "c1")))
        await beats.heartbeat("a", data("c2", "h"))
        return brokers

    brokers = asyncio.run(main())
    assert sorted(brokers.calls) == [("a", ("instance-1", [("g", "c0"), ("g", "c1")])),
                                     ("a", ("instance-1", [("h", "c2")])),
                                     ("b", ("instance-1", [("g", "c0"), ("g", "c1")]))]


def test_a_failed_request_fails_every_consumer_it_carried() -> None:
    async def main() -> list[Any]:
        brokers = FakeBrokers()
        brokers.fail = ConnectFailedError("down")
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        return await asyncio.gather(*(beats.heartbeat("a", data(c)) for c in ("c0", "c1")), return_exceptions=True)

    assert [type(r) for r in asyncio.run(main())] == [ConnectFailedError, ConnectFailedError]


def test_a_consumer_unregisters_after_its_heartbeat_on_the_way_landed_and_a_cancelled_one_is_not_sent() -> None:
    async def main() -> FakeBrokers:
        brokers = FakeBrokers()
        brokers.release.clear()
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        beating = asyncio.ensure_future(beats.heartbeat("a", data("c0")))
        while not brokers.calls:
            await asyncio.sleep(0)
        leaving = asyncio.ensure_future(beats.unregister("a", "c0", "g"))
        late = asyncio.ensure_future(beats.heartbeat("a", data("c1")))
        await asyncio.sleep(0)
        late.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not leaving.done()  # c0's heartbeat is still on its way
        brokers.release.set()
        await asyncio.gather(beating, leaving)
        await asyncio.gather(late, return_exceptions=True)
        await beats.close()
        return brokers

    calls = asyncio.run(main()).calls
    assert calls == [("a", ("instance-1", [("g", "c0")])), ("a", ("unregister", "c0", "g"))]


def test_the_interval_is_the_configured_one_unless_a_brokers_expiry_or_lease_asks_for_four_beats_within_it() -> None:
    async def main() -> list[float]:
        brokers = FakeBrokers()
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        before = beats.interval_s(10.0)
        await beats.heartbeat("old", data("c0"))  # a broker naming no limits
        brokers.answer = pb.HeartbeatResponse(client_expiry_ms=120_000, queue_lease_ms=30_000)
        await beats.heartbeat("a", data("c0"))
        default = beats.interval_s(10.0)
        brokers.answer = pb.HeartbeatResponse(client_expiry_ms=6_000, queue_lease_ms=30_000)
        await beats.heartbeat("b", data("c0"))
        return [before, default, beats.interval_s(10.0), beats.interval_s(1.0)]

    assert asyncio.run(main()) == [10.0, 7.5, 1.5, 1.0]


def test_a_new_connection_carries_the_last_heartbeat_of_each_consumer_there_not_of_one_gone_or_already_going(
        ) -> None:
    async def main() -> FakeBrokers:
        brokers = FakeBrokers()
        brokers.answer = pb.HeartbeatResponse(client_expiry_ms=60_000)
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        for c in ("c0", "c1", "c2"):
            await beats.heartbeat("a", data(c))
        await beats.heartbeat("a", pb.ConsumerData(client_id="c0", group="g", gray_flag=True))  # its latest
        await beats.heartbeat("b", data("c3"))
        await beats.unregister("a", "c1", "g")
        brokers.calls.clear()
        brokers.release.clear()
        going = asyncio.ensure_future(beats.heartbeat("a", data("c2")))  # its own beat on its way
        await asyncio.sleep(0)
        beats.reconnected("a")
        brokers.release.set()
        await going
        while beats._resends:
            await asyncio.sleep(0)
        await beats.close()
        return brokers

    brokers = asyncio.run(main())
    assert brokers.calls == [("a", ("instance-1", [("g", "c2"), ("g", "c0")]))]
    assert [d.gray_flag for d in brokers.sent[-1].consumers] == [False, True]


def test_a_heartbeat_sent_again_keeps_its_age_and_one_older_than_the_brokers_expiry_is_not_sent_again() -> None:
    async def main() -> list[int]:
        brokers = FakeBrokers()
        brokers.answer = pb.HeartbeatResponse(client_expiry_ms=200)
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        await beats.heartbeat("a", data("c0"))
        sent = []
        for _ in range(2):
            await asyncio.sleep(0.12)
            brokers.calls.clear()
            beats.reconnected("a")
            while beats._resends:
                await asyncio.sleep(0)
            sent.append(len(brokers.calls))
        await beats.close()
        return sent

    assert asyncio.run(main()) == [1, 0]  # the second reconnect is 0.24 s after c0's own beat


def test_a_member_whose_heartbeat_is_out_is_not_sent_again_and_a_cancelled_beat_does_not_hold_its_leaving() -> None:
    async def main() -> FakeBrokers:
        brokers = FakeBrokers()
        beats = BrokerBeats(brokers, "instance-1")  # type: ignore[arg-type]
        await beats.heartbeat("a", data("c0"))
        brokers.release.clear()
        out = asyncio.ensure_future(beats.heartbeat("a", data("c0")))
        while len(brokers.calls) < 2:
            await asyncio.sleep(0)
        beats.reconnected("a")  # c0's beat is out: nothing more
        brokers.release.set()
        await out
        cancelled = asyncio.ensure_future(beats.heartbeat("a", data("c1")))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.wait_for(beats.unregister("a", "c1", "g"), 1)
        await beats.close()
        return brokers

    assert [call for _, call in asyncio.run(main()).calls] == [
        ("instance-1", [("g", "c0")]), ("instance-1", [("g", "c0")]), ("unregister", "c1", "g")]
