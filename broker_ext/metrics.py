"""Prometheus text on a small HTTP endpoint: ``GET /metrics`` (anything else is 404)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.stats import Exposition
from graymq.protocol.aio import with_timeout

log = logging.getLogger(__name__)


def render_metrics(broker: BrokerController) -> str:
    out = Exposition()
    stats = broker.stats
    out.metric("graymq_broker_put_messages_total", "counter", "Messages stored, by topic and side.")
    for (topic, gray), n in stats.put_msgs.items():
        out.sample("graymq_broker_put_messages_total", n, topic=topic, gray=str(gray).lower())
    out.metric("graymq_broker_put_bytes_total", "counter", "Bytes stored, by topic and side.")
    for (topic, gray), n in stats.put_bytes.items():
        out.sample("graymq_broker_put_bytes_total", n, topic=topic, gray=str(gray).lower())
    out.metric("graymq_broker_put_rate", "gauge", "Messages stored per second over the last 10 s.")
    for (topic, gray), meter in stats.put_rate.items():
        out.sample("graymq_broker_put_rate", meter.rate(), topic=topic, gray=str(gray).lower())
    out.metric("graymq_broker_get_messages_total", "counter", "Messages pulled, by topic and side.")
    for (topic, gray), n in stats.get_msgs.items():
        out.sample("graymq_broker_get_messages_total", n, topic=topic, gray=str(gray).lower())
    out.metric("graymq_broker_get_rate", "gauge", "Messages pulled per second over the last 10 s.")
    for (topic, gray), meter in stats.get_rate.items():
        out.sample("graymq_broker_get_rate", meter.rate(), topic=topic, gray=str(gray).lower())
    out.metric("graymq_broker_consumer_backlog", "gauge", "max offset - committed offset per group and queue.")
    for group, topic, queue_id, offset in broker.offsets.items():
        config = broker.topics.get(topic)
        if config is None or queue_id >= config.queue_nums:
            continue
        backlog = max(0, broker.store.get_max_offset(topic, queue_id) - offset)
        out.sample("graymq_broker_consumer_backlog", backlog, group=group, topic=topic, queue=queue_id,
                   gray=str(queue_id in config.gray_queues).lower())
    store = broker.store.stats
    out.metric("graymq_broker_flush_total", "counter", "Commit log flushes (fsync).")
    out.sample("graymq_broker_flush_total", store.flush_count)
    out.metric("graymq_broker_flush_seconds_total", "counter", "Time spent flushing the commit log.")
    out.sample("graymq_broker_flush_seconds_total", store.flush_seconds_total)
    out.metric("graymq_broker_last_flush_ms", "gauge", "Latency of the last flush.")
    out.sample("graymq_broker_last_flush_ms", store.last_flush_ms)
    out.metric("graymq_broker_commitlog_max_offset", "gauge", "End of the commit log.")
    out.sample("graymq_broker_commitlog_max_offset", broker.store.max_physical_offset)
    out.metric("graymq_broker_clients", "gauge", "Consumer clients online, by group and flag.")
    for group, info in broker.consumers.groups.items():
        gray_count = sum(1 for c in info.clients.values() if c.gray_flag)
        out.sample("graymq_broker_clients", gray_count, group=group, gray="true")
        out.sample("graymq_broker_clients", len(info.clients) - gray_count, group=group, gray="false")
    out.metric("graymq_broker_long_polls", "gauge", "Pull requests waiting for messages.")
    out.sample("graymq_broker_long_polls", broker.holds.waiting)
    out.metric("graymq_broker_rejected_connections_total", "counter", "Connections closed for protocol errors.")
    out.sample("graymq_broker_rejected_connections_total", stats.connections_rejected)
    return out.text()


class MetricsServer:
    """Minimal HTTP/1.1 responder; one request per connection."""

    def __init__(self, render: Callable[[], str]) -> None:
        self._render = render
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> str:
        self._server = await asyncio.start_server(self._serve, host, port)
        bound = self._server.sockets[0].getsockname()
        return f"{bound[0]}:{bound[1]}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await with_timeout(reader.readline(), 5)
            while (await with_timeout(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request_line.decode("latin-1").split()
            if len(parts) >= 2 and parts[0] == "GET" and parts[1].split("?")[0] == "/metrics":
                status, body, ctype = "200 OK", self._render().encode(), "text/plain; version=0.0.4"
            else:
                status, body, ctype = "404 Not Found", b"not found\n", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode() + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError) as exc:
            log.debug("metrics request failed: %s", exc)
        finally:
            writer.close()
