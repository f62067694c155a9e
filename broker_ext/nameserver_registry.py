"""Registers the broker with every configured name server and applies the topics and deletions they hold.

The broker registers on an interval, and at once when the name server's topic table changes: a long
poll (``POST /v1/brokers/watch``) returns as soon as a topic is created, changed or deleted, so a
topic just created is served within a round trip, not at the next interval. It reports the interval (the name
server keeps it routed a few intervals past its last registration) and unregisters when it stops cleanly, so a
stopped broker leaves the routes at once, a killed one within seconds. A registration that
changed the broker's topics is followed by another, so the name server learns what it now serves.
Deletions are numbered; the broker persists the last one it applied and reports it, so a broker that
was down when a topic or group was deleted applies the deletion when it comes back.

Both loops run supervised (protocol/supervisor.py): whatever escapes a round is logged and the loop restarts.
An answer that is not a JSON object of the expected shape, or a file the broker cannot write while applying it,
fails that round with a WARNING. A registration the name server refuses (401, 403: the broker token does not
cover the broker's name) is an ERROR, in one line with the name server's reason and fix, said once while it lasts;
``refusal`` keeps it for the start-up line, which then says the broker serves no route.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.broker_ext.topic_config import TopicConfig, lane_pairs
from graymq.nameserver_api.client import http_error_text
from graymq.protocol.constants import SCHEDULE_TOPIC
from graymq.protocol.errors import GrayMQError
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.supervisor import Supervisor
from graymq.protocol.tls import https_verify

log = logging.getLogger(__name__)

WATCH_S = 20.0  # how long one watch waits for a change of the topic table
WATCH_GRACE_S = 5.0  # beyond it, for the answer to arrive
LOGGED_ONE_BY_ONE = 5  # more topics changed by one answer are logged in one line
UNREGISTER_S = 2.0  # a stopping broker waits this long for each name server to take it out of the routes


class NameServerRegistry:
    """Heartbeats ``POST /v1/brokers/heartbeat``; keeps serving when every name server is down."""

    def __init__(self, broker: BrokerController, urls: list[str], interval_s: float,
                 grpc_address: str | None = None) -> None:
        self.broker = broker
        self.urls = urls
        self.interval_s = interval_s
        self.grpc_address = grpc_address  # the broker's RocketMQ 5 endpoint, registered so routes list it
        token = broker.settings.token.strip()
        headers = {"Authorization": f"Bearer {token}"} if token else None  # GRAYMQ_BROKER_TOKEN
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(3.0, connect=2.0), headers=headers,
                                         verify=https_verify())
        self._tasks: list[asyncio.Task[None]] = []
        self._supervisor = Supervisor(f"broker {broker.name} name-server registry", self._fatal)
        self._failing: set[str] = set()
        self._refused: dict[str, str] = {}  # url -> why it refused the last registration (401, 403)
        self._lock = asyncio.Lock()
        self._versions: dict[str, str] = {}  # url -> topics_version of its last answer
        self._principal_log = ThrottledLog(log, 60.0)
        self._unapplied: dict[str, TopicConfig] = {}  # topic -> the config from the name server it cannot apply
        self._state_path = broker.settings.store_dir / "config" / "deletions_applied.json"
        self.deletions_applied = int(read_json(self._state_path, {"deletions_applied": 0})["deletions_applied"])

    def start(self) -> None:
        self._tasks = [self._supervisor.spawn("nameserver-registry", self._run),
                       self._supervisor.spawn("nameserver-watch", self._watch)]

    def register_soon(self) -> None:
        """One registration now, in the background: a replica that took its set's lead is in the routes at once,
        not a registration interval later."""
        self._supervisor.spawn("nameserver-register", self.register_once)

    async def stop(self) -> None:
        """End its loops and registrations (never raises what they ended with), unregister, and close the HTTP
        client."""
        await self._supervisor.cancel(list(self._supervisor.tasks))
        await self._unregister()
        await self._client.aclose()

    async def _unregister(self) -> None:
        """Leave the routes of every reachable name server at once (clients stop choosing this broker); one that
        does not answer drops it when its lease runs out."""
        body: dict[str, object] = {"broker_name": self.broker.name, "address": self.broker.address}
        if self.broker.role.replicated:
            body["replica_id"] = self.broker.role.replica_id
        for url in self.urls:
            try:
                response = await self._client.post(f"{url}/v1/brokers/unregister", json=body,
                                                   timeout=httpx.Timeout(UNREGISTER_S))
                response.raise_for_status()
            except httpx.HTTPError as exc:
                log.warning("unregistering from name server %s failed: %s; it unroutes this broker when its "
                            "lease runs out", url, http_error_text(exc))
            else:
                log.info("unregistered from name server %s", url)

    def _fatal(self, exc: GrayMQError, where: str) -> None:
        log.error("%s ended: %s", where, exc.message)

    async def _run(self) -> None:
        while True:
            await self.register_once()
            await asyncio.sleep(self.interval_s)

    async def _watch(self) -> None:
        """Long-poll a reachable name server; register at once when its topic table differs from the last seen."""
        while True:
            target = next(((url, v) for url, v in self._versions.items() if url not in self._failing), None)
            if target is None:
                await asyncio.sleep(self.interval_s)
                continue
            url, known = target
            body = {"broker_name": self.broker.name, "topics_version": known, "timeout_s": WATCH_S}
            try:
                response = await self._client.post(f"{url}/v1/brokers/watch", json=body,
                                                   timeout=httpx.Timeout(WATCH_S + WATCH_GRACE_S, connect=2.0))
                response.raise_for_status()
                version = str(response.json()["topics_version"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                log.debug("watching name server %s failed: %s", url,
                          http_error_text(exc) if isinstance(exc, httpx.HTTPError) else exc)
                await asyncio.sleep(self.interval_s)
                continue
            if version != self._versions.get(url):
                await self.register_once()

    def _body(self) -> dict[str, object]:
        topics = [
            {"topic": c.topic, "queue_nums": c.queue_nums, "gray_queue_nums": c.gray_queue_nums, "perm": c.perm,
             "lane_slots": c.lane_slots}
            for c in self.broker.topics.all() if c.topic != SCHEDULE_TOPIC
        ]
        body: dict[str, object] = {"broker_name": self.broker.name, "address": self.broker.address,
                                   "topics": topics, "deletions_applied": self.deletions_applied,
                                   "register_interval_s": self.interval_s}
        if self.broker.role.replicated:
            body["replica_id"] = self.broker.role.replica_id  # only the set's leader sets the route
        if self.grpc_address is not None:
            body["grpc_address"] = self.grpc_address
        return body

    @property
    def refusal(self) -> str | None:
        """Why this broker is in no route, when every name server refused its last registration (``None``: one
        registered it, or one could not be reached)."""
        if self.urls and all(url in self._refused for url in self.urls):
            return "; ".join(f"name server {url} refused its registration: {why}" for url, why in self._refused.items())
        return None

    async def register_once(self) -> None:
        """Register with every name server; once more when that changed the broker's topics."""
        async with self._lock:
            if await self._register_round():
                await self._register_round()

    async def _register_round(self) -> bool:
        """One registration with each name server; returns whether the answers changed the broker's topics.

        The principals are read from the first name server that registered the broker."""
        before = self.broker.topics.version
        principals_read = False
        for url in self.urls:
            try:
                response = await self._client.post(f"{url}/v1/brokers/heartbeat", json=self._body())
                response.raise_for_status()
                self._apply(url, _checked_answer(response.json()))
            except httpx.HTTPStatusError as exc:
                self._failed(url, exc)
                continue
            except (httpx.HTTPError, ValueError, TypeError) as exc:
                if url not in self._failing:
                    log.warning("registering with name server %s failed: %s", url,
                                http_error_text(exc) if isinstance(exc, httpx.HTTPError) else exc)
                self._failing.add(url)
                continue
            except OSError as exc:
                log.warning("applying the answer of name server %s failed: %s; retrying next round", url, exc)
                continue
            if self._refused.pop(url, None) is not None:
                log.info("broker %s registered with name server %s: serving its routes", self.broker.name, url)
                self._failing.discard(url)
            elif url in self._failing:
                log.info("name server %s reachable again", url)
                self._failing.discard(url)
            if not principals_read:
                principals_read = await self._read_principals(url)
        return self.broker.topics.version != before

    def _failed(self, url: str, exc: httpx.HTTPStatusError) -> None:
        """A registration answered with an error: a refusal (401, 403) is an ERROR line naming why and, from the
        name server, how to fix it, logged again only when the reason changes; any other answer a WARNING."""
        why = http_error_text(exc)
        if exc.response.status_code in (401, 403):
            if self._refused.get(url) != why:
                log.error("broker %s is not serving any route: name server %s refused its registration: %s",
                          self.broker.name, url, why)
            self._refused[url] = why
        elif url not in self._failing:
            log.warning("registering with name server %s failed: %s", url, why)
        self._failing.add(url)

    async def read_principals(self) -> bool:
        """Read the principals now (a connection presented a token the broker does not know) from the first name
        server that answers; whether one did. Name servers the last registration round did not reach are not
        asked: with every one down, an unknown token is refused at once, not after their timeouts."""
        for url in self.urls:
            if url not in self._failing and await self._read_principals(url):
                return True
        return False

    async def _read_principals(self, url: str) -> bool:
        """Take the name server's principals (token digests and rights); whether that worked (304: the broker's
        table is the name server's version, which it sends as ``If-None-Match``). A failure keeps the table the
        broker has, which it goes on enforcing."""
        table = self.broker.principals
        try:
            headers = {"If-None-Match": f'"{table.version}"'} if table.version else {}
            response = await self._client.get(f"{url}/v1/principals/digests", headers=headers)
            if response.status_code == httpx.codes.NOT_MODIFIED:
                return True
            response.raise_for_status()
            if table.apply(response.json()):
                log.info("principals from name server %s: %d (version %s)", url, len(table), table.version)
        except (httpx.HTTPError, ValueError) as exc:
            self._principal_log.log(logging.DEBUG if self.broker.settings.dev_mode else logging.WARNING, url,
                                    "reading principals from name server %s failed: %s; keeping the %d known",
                                    url, http_error_text(exc) if isinstance(exc, httpx.HTTPError) else exc,
                                    len(table))
            return False
        except OSError as exc:
            log.warning("writing the principals from name server %s failed: %s; retrying next round", url, exc)
            return False
        return True

    def _apply(self, url: str, answer: dict[str, Any]) -> None:
        """Deletions first (a topic deleted, then created again, must come back), then the configured topics."""
        for deletion in answer.get("deletions", []):
            self._apply_deletion(deletion)
        last = int(answer.get("last_deletion_id", self.deletions_applied))
        if last != self.deletions_applied:
            self.deletions_applied = last
            write_json_atomic(self._state_path, {"deletions_applied": last})
        self._apply_topics(answer.get("topics", []))
        self._versions[url] = str(answer.get("topics_version", ""))

    def _apply_deletion(self, deletion: dict[str, Any]) -> None:
        kind, name = deletion.get("kind"), str(deletion.get("name", ""))
        if kind == "topic" and name != SCHEDULE_TOPIC:
            self._unapplied.pop(name, None)
            if self.broker.delete_topic(name):
                log.info("topic %s deleted by the name server", name)
        elif kind == "group":
            self.broker.offsets.drop_group(name)
            log.info("offsets of group %s dropped: the group was deleted in the name server", name)

    def _apply_topics(self, raws: list[dict[str, Any]]) -> None:
        """Apply the configured topics at once (one write of the topic table however many changed); a config the
        broker cannot apply is logged once, not at every registration."""
        configs = []
        for raw in raws:
            try:
                configs.append(self._topic_config(raw))
            except (KeyError, TypeError, ValueError, AttributeError, GrayMQError) as exc:
                log.warning("ignoring topic %r from the name server: %s", raw, exc)
        changed, refused = self.broker.topics.update_all(configs)
        for config, why in refused:
            if self._unapplied.get(config.topic) != config:
                log.warning("not applying topic %s from the name server: %s", config.topic, why.message)
                self._unapplied[config.topic] = config
        still_refused = {config.topic for config, _ in refused}
        for config in configs:
            if config.topic not in still_refused:
                self._unapplied.pop(config.topic, None)
        if len(changed) <= LOGGED_ONE_BY_ONE:
            for config in changed:
                log.info("topic %s updated from the name server: %s", config.topic, config)
        elif changed:
            log.info("%d topics updated from the name server (%s, ...)", len(changed),
                     ", ".join(c.topic for c in changed[:LOGGED_ONE_BY_ONE]))

    def _topic_config(self, raw: dict[str, Any]) -> TopicConfig:
        """A topic config of the name server's answer. Without ``lane_slots`` (a name server from before lanes) the
        broker keeps the slots it has; without ``lanes`` the lane map it knows."""
        topic = str(raw["topic"])
        current = self.broker.topics.get(topic)
        lane_slots = raw.get("lane_slots")
        if lane_slots is None:
            lane_slots = current.lane_slots if current is not None else 1
        lanes = raw.get("lanes")
        return TopicConfig(topic, int(raw["queue_nums"]), int(raw.get("gray_queue_nums", 0)), int(raw.get("perm", 6)),
                           lane_slots=int(lane_slots), lanes=None if lanes is None else lane_pairs(lanes))


def _checked_answer(answer: Any) -> dict[str, Any]:
    """The heartbeat answer if it has the expected shape (objects where objects belong), else ``ValueError``."""
    if not isinstance(answer, dict):
        raise ValueError(f"the answer is a JSON {type(answer).__name__}, not an object")
    for key in ("deletions", "topics"):
        items = answer.get(key, [])
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ValueError(f"the answer's {key!r} is not a list of objects")
    return answer
