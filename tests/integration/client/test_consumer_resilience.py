"""A push consumer never stops in silence: damaged records are skipped, broker failures waited out, a
permanent error ends it with one clear line — against a broker double on real sockets and a real name server."""

from __future__ import annotations

import asyncio
import logging

import pytest

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.devkit.ports import free_port
from graymq.protocol.errors import BadRequestError, GrayMQError, NoPermissionError, TopicNotExistError
from tests.support.cli import json_lines
from tests.support.clients import FAST, run_scenario, wait_until
from tests.support.fake_broker import FakeBroker, record

pytestmark = pytest.mark.integration
GROUP = "GID_RESILIENCE"
TOPIC = "TOPIC_RESILIENCE"
BROKER = "fake-a"


def fake_broker(count: int = 10, damaged: tuple[int, ...] = ()) -> FakeBroker:
    return FakeBroker(BROKER, TOPIC, queues={0: [record(TOPIC, 0, i, f"m{i}".encode(), damaged=i in damaged)
                                               for i in range(count)]})


def push_consumer(ns_url: str, received: list[MessageExt], **kw: object) -> PushConsumer:
    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        received.extend(messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, ns_url, listener=listener, client_id="c1", consume_from="first",
                            **{**FAST, **kw})  # type: ignore[arg-type]
    consumer.subscribe(TOPIC, "*")
    return consumer


def records_of(caplog, level: int, logger: str = "graymq") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name.startswith(logger)]


def test_a_damaged_record_in_the_middle_of_a_pull_is_skipped_logged_counted_and_the_queue_flows_on(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(10, damaged=(4,))
        await broker.start(cluster.ns_url)
        received: list[MessageExt] = []
        consumer = push_consumer(cluster.ns_url, received)
        await consumer.start()
        try:
            await wait_until(lambda: broker.offsets.get((GROUP, TOPIC, 0)) == 10, 30,
                             "the committed offset to move past the whole queue")
            assert [m.body for m in received] == [f"m{i}".encode() for i in range(10) if i != 4]
            assert consumer.skipped_records == 1 and consumer.failure is None
        finally:
            await consumer.stop()
            await broker.stop()

    run_scenario(scenario, 60)
    (line,) = [m for m in records_of(caplog, logging.ERROR) if "damaged record" in m]
    assert f"topic {TOPIC} queue 0 on broker {BROKER}" in line and "queue offset 4: " in line
    assert "CRC mismatch" in line


def test_a_failing_pull_is_retried_with_one_warning_naming_the_queue_and_resumes(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(5)
        broker.fail["PULL_MESSAGE"] = GrayMQError("internal error: disk read failed")
        await broker.start(cluster.ns_url)
        received: list[MessageExt] = []
        consumer = push_consumer(cluster.ns_url, received)
        await consumer.start()
        try:
            await wait_until(lambda: broker.calls.count("PULL_MESSAGE") >= 5, 30, "several failed pulls")
            assert received == [] and consumer.failure is None
            del broker.fail["PULL_MESSAGE"]
            await wait_until(lambda: len(received) == 5, 30, "the messages once the broker answers again")
        finally:
            await consumer.stop()
            await broker.stop()

    run_scenario(scenario, 60)
    warnings = [m for m in records_of(caplog, logging.WARNING) if "pull of" in m]
    assert len(warnings) == 1, warnings  # not one per retry
    assert f"pull of topic {TOPIC} queue 0 from broker {BROKER}" in warnings[0]
    assert "internal error: disk read failed (SYSTEM_ERROR); retrying" in warnings[0]
    assert any("works again after" in m for m in records_of(caplog, logging.INFO))


def test_a_permanent_pull_error_ends_the_consumer_with_one_error_line_and_releases_it(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(5)
        broker.fail["PULL_MESSAGE"] = NoPermissionError(f"topic {TOPIC} is not readable")
        await broker.start(cluster.ns_url)
        consumer = push_consumer(cluster.ns_url, [])
        await consumer.start()
        cause = await asyncio.wait_for(consumer.wait_failed(), 30)
        assert isinstance(cause, NoPermissionError) and consumer.failure is cause
        assert "UNREGISTER_CLIENT" in broker.calls and not broker.clients, "left the group on the broker"
        pulling = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("pull ") and not t.done()]
        assert not pulling, f"pull loops left after the failure: {pulling}"
        await consumer.stop()  # still safe
        await broker.stop()

    run_scenario(scenario, 60)
    (line,) = records_of(caplog, logging.ERROR)
    assert f"consumer c1 of group {GROUP} failed and stops consuming: topic {TOPIC} is not readable" in line
    assert "NO_PERMISSION" in line and f"topic {TOPIC} queue 0 from broker {BROKER}" in line


def test_a_heartbeat_refused_as_invalid_fails_start_with_that_error(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(3)
        broker.fail["HEARTBEAT"] = BadRequestError(f"subscription to {TOPIC} is invalid")
        await broker.start(cluster.ns_url)
        consumer = push_consumer(cluster.ns_url, [])
        try:
            with pytest.raises(BadRequestError, match="is invalid"):
                await consumer.start()
            assert consumer.failure is not None and "PULL_MESSAGE" not in broker.calls
            assert await asyncio.wait_for(consumer.wait_failed(), 5) is consumer.failure
        finally:
            await consumer.stop()
            await broker.stop()

    run_scenario(scenario, 60)
    (line,) = records_of(caplog, logging.ERROR)
    assert f"subscription to {TOPIC} is invalid (BAD_REQUEST, in heartbeat of group {GROUP} to broker" in line


def test_a_topic_the_broker_and_the_name_server_no_longer_know_ends_the_consumer(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(3)
        await broker.start(cluster.ns_url)
        received: list[MessageExt] = []
        consumer = push_consumer(cluster.ns_url, received)
        await consumer.start()
        try:
            await wait_until(lambda: len(received) == 3, 30, "the messages")
            broker.fail["PULL_MESSAGE"] = TopicNotExistError(f"topic {TOPIC} does not exist on this broker")
            await wait_until(lambda: broker.calls.count("PULL_MESSAGE") >= 6, 30, "pulls refused")
            assert consumer.failure is None, "the name server still routes it: the broker may lag behind"

            async def deleted(topic: str) -> object:
                raise TopicNotExistError(f"no route for topic {topic}")

            async def all_deleted(topics: list[str]) -> dict[str, object]:
                return {topic: TopicNotExistError(f"no route for topic {topic}") for topic in topics}

            consumer.nameserver.get_route = deleted  # type: ignore[method-assign]  # as after a topic delete
            consumer.nameserver.get_routes = all_deleted  # type: ignore[method-assign]
            cause = await asyncio.wait_for(consumer.wait_failed(), 30)
            assert isinstance(cause, TopicNotExistError) and "was deleted" in cause.message
        finally:
            await consumer.stop()
            await broker.stop()

    run_scenario(scenario, 60)
    (line,) = records_of(caplog, logging.ERROR)
    assert f"topic {TOPIC} was deleted" in line


def test_an_unexpected_exception_in_the_commit_loop_is_logged_at_error_and_the_loop_restarted(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")

    async def scenario() -> None:
        broker = fake_broker(4)
        await broker.start(cluster.ns_url)
        consumer = push_consumer(cluster.ns_url, [])
        write = consumer.offset_store.write
        failures = [RuntimeError("offset store bug")]
        written: list[int] = []

        async def buggy_write(mq, address, offset):  # type: ignore[no-untyped-def]
            if offset == 4 and failures:  # the persist loop's commit after the last message
                raise failures.pop()
            await write(mq, address, offset)
            written.append(offset)

        consumer.offset_store.write = buggy_write  # type: ignore[method-assign]
        await consumer.start()
        try:
            await wait_until(lambda: not failures, 30, "the bug to hit the persist loop")
            await wait_until(lambda: 4 in written, 30, "the restarted persist loop to commit")
            assert consumer.failure is None
        finally:
            await consumer.stop()
            await broker.stop()

    run_scenario(scenario, 60)
    (line,) = records_of(caplog, logging.ERROR)
    assert "persist failed unexpectedly (RuntimeError: offset store bug); restarting it in" in line
    assert [r for r in caplog.records if r.levelno == logging.ERROR][0].exc_info is not None, "with its traceback"


async def run_cli(graymq_process, broker: FakeBroker, ns_url: str, *args: str):  # type: ignore[no-untyped-def]
    """``graymq consume`` against ``broker`` until it exits; returns the process."""
    await broker.start(ns_url)
    try:
        proc = graymq_process("consume", TOPIC, "--group", GROUP, "--from", "first", "--nameserver", ns_url, *args,
                              wait=False)
        deadline = asyncio.get_running_loop().time() + 60
        while proc.proc.poll() is None:
            assert asyncio.get_running_loop().time() < deadline, f"graymq consume still running:\n{proc.output}"
            await asyncio.sleep(0.1)
        proc.kill()  # joins the output reader
        return proc
    finally:
        await broker.stop()


def test_graymq_consume_skips_a_damaged_record_and_prints_every_other_message(cluster, graymq_process):
    async def scenario() -> None:
        proc = await run_cli(graymq_process, fake_broker(10, damaged=(4,)), cluster.ns_url, "--json", "--max", "9")
        assert proc.proc.returncode == 0, proc.output
        assert [m["queue_offset"] for m in json_lines(proc)] == [i for i in range(10) if i != 4]
        (line,) = [line for line in proc.lines if "damaged record" in line]
        assert "ERROR" in line and f"topic {TOPIC} queue 0 on broker {BROKER}" in line and "queue offset 4:" in line

    run_scenario(scenario, 90)


def test_graymq_consume_exits_1_with_one_error_line_when_the_consumer_fails(cluster, graymq_process):
    async def scenario() -> None:
        broker = fake_broker(3)
        broker.fail["PULL_MESSAGE"] = NoPermissionError(f"topic {TOPIC} is not readable")
        proc = await run_cli(graymq_process, broker, cluster.ns_url)
        assert proc.proc.returncode == 1, proc.output
        assert "Traceback" not in proc.output
        (line,) = [line for line in proc.lines if "not readable" in line]
        assert "ERROR" in line and "failed and stops consuming" in line and "NO_PERMISSION" in line
        assert [line for line in proc.lines if " ERROR " in line] == [line]

    run_scenario(scenario, 90)


def test_a_broker_killed_and_restarted_under_a_push_consumer_is_waited_out_without_loss(cluster, caplog):
    caplog.set_level(logging.INFO, logger="graymq")
    port = free_port()
    cluster.add_broker("broker-a", "--port", str(port))
    cluster.create_topic(TOPIC, 4, 0)

    def pull_warnings() -> list[str]:
        return [m for m in records_of(caplog, logging.WARNING) if m.startswith(f"pull of topic {TOPIC}")]

    async def scenario() -> None:
        received: set[str] = set()

        async def slow_listener(messages: list[MessageExt]) -> ConsumeStatus:
            await asyncio.sleep(0.05)
            received.update(m.msg_id for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(GROUP, cluster.ns_url, listener=slow_listener, client_id="c1", consume_from="first",
                                max_threads=1, **FAST)  # type: ignore[arg-type]
        consumer.subscribe(TOPIC)
        producer = Producer("P_RESILIENCE", cluster.ns_url)
        await producer.start()
        await consumer.start()
        try:
            sent = [(await producer.send(Message(TOPIC, f"before-{i}".encode()))).msg_id for i in range(40)]
            await wait_until(lambda: len(received) >= 5, 30, "the first messages")
            await asyncio.to_thread(cluster.brokers["broker-a"].kill)  # SIGKILL, messages still to consume
            await wait_until(lambda: any("from broker broker-a" in m for m in pull_warnings()), 30, "a pull warning")
            await asyncio.to_thread(cluster.add_broker, "broker-a", "--port", str(port))
            sent += [(await producer.send(Message(TOPIC, f"after-{i}".encode()))).msg_id for i in range(20)]
            await wait_until(lambda: set(sent) <= received, 60, "every message, sent before and after the restart")
            assert consumer.failure is None
        finally:
            await consumer.stop()
            await producer.stop()

    run_scenario(scenario, 150)
    warnings = pull_warnings()
    assert len(warnings) == len(set(warnings)), f"an identical warning logged twice: {warnings}"
    assert any("works again after" in m for m in records_of(caplog, logging.INFO))
