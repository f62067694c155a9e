"""Registers the broker with every configured name server on an interval and applies the topics they hold."""

from __future__ import annotations

import asyncio
import logging

import httpx

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.constants import SCHEDULE_TOPIC
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)


class NameServerRegistry:
    """Heartbeats ``POST /v1/brokers/heartbeat``; keeps serving when every name server is down."""

    def __init__(self, broker: BrokerController, urls: list[str], interval_s: float) -> None:
        self.broker = broker
        self.urls = urls
        self.interval_s = interval_s
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(3.0, connect=2.0))
        self._task: asyncio.Task[None] | None = None
        self._failing: set[str] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="nameserver-registry")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            await self.register_once()
            await asyncio.sleep(self.interval_s)

    def _body(self) -> dict[str, object]:
        topics = [
            {"topic": c.topic, "queue_nums": c.queue_nums, "gray_queue_nums": c.gray_queue_nums, "perm": c.perm}
            for c in self.broker.topics.all() if c.topic != SCHEDULE_TOPIC
        ]
        return {"broker_name": self.broker.name, "address": self.broker.address, "topics": topics}

    async def register_once(self) -> None:
        body = self._body()
        for url in self.urls:
            try:
                response = await self._client.post(f"{url}/v1/brokers/heartbeat", json=body)
                response.raise_for_status()
                self._apply(response.json().get("topics", []))
            except (httpx.HTTPError, ValueError) as exc:
                if url not in self._failing:
                    log.warning("registering with name server %s failed: %s", url, exc)
                self._failing.add(url)
                continue
            if url in self._failing:
                log.info("name server %s reachable again", url)
                self._failing.discard(url)

    def _apply(self, topics: list[dict[str, int | str]]) -> None:
        for raw in topics:
            try:
                config = TopicConfig(str(raw["topic"]), int(raw["queue_nums"]), int(raw.get("gray_queue_nums", 0)),
                                     int(raw.get("perm", 6)))
                if self.broker.topics.update(config):
                    log.info("topic %s updated from the name server: %s", config.topic, config)
            except (KeyError, TypeError, ValueError, GrayMQError) as exc:
                log.warning("ignoring topic %r from the name server: %s", raw, exc)
