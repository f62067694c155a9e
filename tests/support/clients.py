"""In-process clients for integration tests: consumers that record who consumed what, with fast intervals."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from graymq.client import ConsumeStatus, MessageExt, PushConsumer

FAST = dict(rebalance_interval_s=1.0, heartbeat_interval_s=0.5, nameserver_interval_s=0.3, long_poll_s=1.0,
            persist_interval_s=0.2, drain_poll_s=0.1)


@dataclass(frozen=True)
class Consumed:
    client_id: str
    msg_id: str
    topic: str
    broker: str
    queue_id: int
    gray: bool
    tags: str
    at: float


@dataclass
class Recorder:
    """Every message every consumer handled, in order."""

    events: list[Consumed] = field(default_factory=list)

    def listener(self, client_id: str, delay_s: float = 0.0) -> Callable[[list[MessageExt]], object]:
        async def on_messages(messages: list[MessageExt]) -> ConsumeStatus:
            for m in messages:
                if delay_s:
                    await asyncio.sleep(delay_s)
                self.events.append(Consumed(client_id, m.msg_id, m.topic, m.broker_name, m.queue_id, m.gray, m.tags,
                                            time.monotonic()))
            return ConsumeStatus.CONSUME_SUCCESS

        return on_messages

    def by_client(self) -> dict[str, list[Consumed]]:
        out: dict[str, list[Consumed]] = {}
        for e in self.events:
            out.setdefault(e.client_id, []).append(e)
        return out

    def msg_ids(self) -> set[str]:
        return {e.msg_id for e in self.events}


def consumer(recorder: Recorder, ns_url: str, group: str, client_id: str, subs: dict[str, str], *,
             labels: dict[str, str] | None = None, gray: bool | None = None, delay_s: float = 0.0,
             **kw: object) -> PushConsumer:
    c = PushConsumer(group, ns_url, listener=recorder.listener(client_id, delay_s), client_id=client_id,
                     labels=labels, gray=gray, consume_from="first", **{**FAST, **kw})  # type: ignore[arg-type]
    for topic, expression in subs.items():
        c.subscribe(topic, expression)
    return c


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def run_scenario(coro_fn: Callable[[], object], timeout: float = 120.0) -> None:
    """``asyncio.run`` with a deadline: a hang fails the test with every task's stack instead of stalling."""
    import io

    async def guarded() -> None:
        task = asyncio.ensure_future(coro_fn())  # type: ignore[arg-type]
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            task.result()
            return
        buf = io.StringIO()
        for t in asyncio.all_tasks():
            if t is not asyncio.current_task():
                t.print_stack(file=buf)
        task.cancel()
        raise AssertionError(f"scenario still running after {timeout}s; tasks:\n{buf.getvalue()}")

    asyncio.run(guarded())
