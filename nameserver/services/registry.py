"""Broker registration (heartbeats with leases), topic routes, and what brokers must apply.

A registration keeps a broker routed for ``broker_lease_s``: a few of the intervals it reports registering at, so a
killed broker leaves the routes within seconds; a broker that stops cleanly unregisters and leaves them at once.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import NotFound
from graymq.nameserver.models import Topic
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.deletions import DeletionRepository
from graymq.nameserver.repositories.lanes import LaneRepository
from graymq.nameserver.repositories.replica_sets import ReplicaSetRepository
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import (
    BrokerHeartbeat,
    BrokerHeartbeatResponse,
    BrokerRoute,
    BrokerUnregister,
    BrokerUnregisterResponse,
    BrokerView,
    DeletionView,
    TopicConfig,
    TopicRoute,
)
from graymq.nameserver.services.replica_sets import ReplicaSetService
from graymq.nameserver.services.route_lease import broker_lease_s
from graymq.nameserver.services.views import base_config, broker_topic_config, total_queue_nums
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import BROKER_REGISTERED, TOPIC_TABLE_CHANGED, mark_changed
from graymq.protocol.acl import group_of_topic
from graymq.protocol.retry import ThrottledLog

log = logging.getLogger(__name__)
_log = ThrottledLog(log, 60.0)
LOGGED_TOPICS = 5


class RegistryService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.brokers = BrokerRepository(session)
        self.topics = TopicRepository(session)
        self.deletions = DeletionRepository(session)

    def heartbeat(self, report: BrokerHeartbeat, *, may_create_topics: bool = True) -> BrokerHeartbeatResponse:
        """Renew the broker's lease, replace its routes, and hand back every configured topic and the deletions
        it has not applied yet.

        A topic the broker reports that is not configured yet is recorded with the broker's layout, unless
        it is one of those deletions (the broker still has it because it has not applied the deletion). Without
        ``may_create_topics`` (a broker token: topics are created by admins) only the retry and dead-letter topics
        brokers make for their groups are; another unconfigured topic gets no route (logged).
        """
        now = utc_now()
        lease = broker_lease_s(self.settings, report.register_interval_s)
        broker_id, moved = None, False
        if self._routes_to(report):
            # This locks the broker's row first: a deletion (which locks every broker row) has then either
            # committed, and is read below, or waits for this heartbeat. Read before the lock, a deletion committed
            # in between went unseen and the broker's report re-created the deleted topic.
            broker_id, moved = self._renew(report, now, now + timedelta(seconds=lease))
        pending = self.deletions.after(report.deletions_applied)
        deleted = {d.name for d in pending if d.kind == "topic"}
        reported = [t for t in report.topics if t.topic not in deleted]
        if not may_create_topics:
            reported = self._configured_or_own(report.broker_name, reported)
        if broker_id is not None:
            rerouted = self.brokers.replace_routes(broker_id, reported)
            own = [base_config(t) for t in reported if group_of_topic(t.topic) is not None]
            if self.topics.add_missing([base_config(t) for t in reported]) or self.topics.grow_slots(own):
                mark_changed(self.session, TOPIC_TABLE_CHANGED)
            if moved or rerouted:  # else routes and readiness read what they read before: nothing to drop or wake
                mark_changed(self.session, BROKER_REGISTERED)
        topics, lanes = self.topics.all(), self._lane_maps()
        last_deletion_id = pending[-1].id if pending else self.deletions.last_id()
        self.session.commit()
        return BrokerHeartbeatResponse(
            lease_seconds=lease,
            topics=[broker_topic_config(t, lanes.get(t.name)) for t in topics],
            topics_version=_version(topics, last_deletion_id, lanes),
            deletions=[DeletionView(id=d.id, kind=d.kind, name=d.name) for d in pending],  # type: ignore[arg-type]
            last_deletion_id=last_deletion_id,
        )

    def _renew(self, report: BrokerHeartbeat, now: datetime, lease_expires_at: datetime) -> tuple[int, bool]:
        """Renew the broker's lease, its row locked first: (its row id, whether where its route points changed). It
        did for a broker new, at another address or gRPC address, or back from an expired lease (routes computed
        meanwhile left it out, and ``readiness`` counted it as not live)."""
        before = self.brokers.registration(report.broker_name)
        broker_id = self.brokers.upsert(report.broker_name, report.address, now, lease_expires_at,
                                        report.grpc_address)
        moved = before is None or before.lease_expires_at <= now or (
            (before.address, before.grpc_address) != (report.address, report.grpc_address))
        return broker_id, moved

    def _configured_or_own(self, broker_name: str, reported: list[TopicConfig]) -> list[TopicConfig]:
        """The reported topics that are configured, or a group's retry or dead-letter topic."""
        configured = {t.name for t in self.topics.by_names([t.topic for t in reported])} if reported else set()
        kept = [t for t in reported if t.topic in configured or group_of_topic(t.topic) is not None]
        if len(kept) < len(reported):
            unknown = sorted({t.topic for t in reported} - {t.topic for t in kept})
            _log.log(logging.WARNING, (broker_name, tuple(unknown[:LOGGED_TOPICS])),
                     "broker %s reports %d topics not created in the name server (%s): not routed; topics are "
                     "created by admins (graymq topic create)", broker_name, len(unknown),
                     ", ".join(unknown[:LOGGED_TOPICS]))
        return kept

    def unregister(self, report: BrokerUnregister) -> BrokerUnregisterResponse:
        """A broker stopping cleanly leaves the routes at once (its topic routes are kept for its return).

        Only the process at the routed address does: one registered since under the name keeps the route. A set's
        replica stops being live; a follower leaves the route as it was, and so does a leader with a live in-sync
        follower (elected when the leader's lease runs out, it takes the route over: until then the route keeps the
        set's gray queues known rather than absent).
        """
        now = utc_now()
        if report.replica_id is not None:
            sets = ReplicaSetRepository(self.session)
            sets.expire_replica(report.broker_name, report.replica_id, report.address, now)
            row = sets.set_of(report.broker_name, lock=True)
            if row is not None and (row.leader_replica_id != report.replica_id or any(
                    r.replica_id in row.in_sync and r.replica_id != row.leader_replica_id and r.lease_expires_at > now
                    for r in sets.replicas_of([report.broker_name]))):
                self.session.commit()
                return BrokerUnregisterResponse(unrouted=False)
        unrouted = self.brokers.expire(report.broker_name, report.address, now)
        if unrouted:
            mark_changed(self.session, BROKER_REGISTERED)
        self.session.commit()
        return BrokerUnregisterResponse(unrouted=unrouted)

    def _routes_to(self, report: BrokerHeartbeat) -> bool:
        """Whether the reporting broker is where its name's route points: a broker without replicas always, a
        replica of a set only while it leads (a follower learns its topics here, but serves no route)."""
        if report.replica_id is None:
            return True
        row = ReplicaSetRepository(self.session).set_of(report.broker_name)
        return row is not None and row.leader_replica_id == report.replica_id

    def topics_version(self) -> str:
        """What a broker's watch compares: it changes whenever the topic table or the deletion log does."""
        return _version(self.topics.all(), self.deletions.last_id(), self._lane_maps())

    def _lane_maps(self) -> dict[str, dict[str, int]]:
        """topic -> lane -> the slot it holds (one statement)."""
        maps: dict[str, dict[str, int]] = {}
        for topic, slot, lane in LaneRepository(self.session).all_slots():
            maps.setdefault(topic, {})[lane] = slot
        return maps

    def readiness(self, config: TopicConfig) -> tuple[list[str], list[str]]:
        """(ready, pending): the live brokers that report ``config``'s topic (as configured: its base count) with its
        layout, and the others."""
        now = utc_now()
        total = total_queue_nums(config.queue_nums, config.gray_queue_nums, config.lane_slots)
        wanted = (total, config.gray_queue_nums, config.perm, config.lane_slots)
        serving = {
            b.broker_name
            for b, r in self.brokers.live_routes(now, config.topic)
            if (r.queue_nums, r.gray_queue_nums, r.perm, r.lane_slots) == wanted
        }
        live = [b.broker_name for b in self.brokers.live(now)]
        return [b for b in live if b in serving], [b for b in live if b not in serving]

    def live_brokers(self) -> list[BrokerView]:
        now = utc_now()
        topics: dict[int, list[str]] = {}
        for broker, route in self.brokers.live_routes(now):
            topics.setdefault(broker.id, []).append(route.topic)
        live = self.brokers.live(now)
        sets = ReplicaSetService(self.session, self.settings).views([b.broker_name for b in live])
        return [
            BrokerView(
                broker_name=b.broker_name,
                address=b.address,
                last_heartbeat=b.last_heartbeat,
                lease_expires_at=b.lease_expires_at,
                topics=topics.get(b.id, []),
                replica_set=sets.get(b.broker_name),
                grpc_address=b.grpc_address,
            )
            for b in live
        ]

    def route(self, topic_name: str, refused: str = "") -> TopicRoute:
        """Live brokers carrying the topic; when none reported it yet, every live broker with the
        configured layout (a topic just created reaches them at their next heartbeat). ``refused``: the
        registrations refused lately, the detail of a "no live broker" answer."""
        return self.routed(topic_name, refused)[0]

    def routed(self, topic_name: str, refused: str = "") -> tuple[TopicRoute, float]:
        """``route``, and the seconds until the first lease of its brokers ends (the route stays as it is until
        then, unless a registration or a topic changes it)."""
        now = utc_now()
        topic = self.topics.get(topic_name)
        carried = self.brokers.live_routes(now, topic_name)
        live = [b for b, _ in carried] if carried else self.brokers.live(now) if topic is not None else []
        if carried:
            brokers = [
                BrokerRoute(
                    broker_name=b.broker_name,
                    address=b.address,
                    grpc_address=b.grpc_address,
                    queue_nums=r.queue_nums,
                    gray_queue_nums=r.gray_queue_nums,
                    perm=r.perm,
                    lane_slots=r.lane_slots,
                )
                for b, r in carried
            ]
        elif topic is not None:
            brokers = [
                BrokerRoute(
                    broker_name=b.broker_name,
                    address=b.address,
                    grpc_address=b.grpc_address,
                    queue_nums=total_queue_nums(topic.queue_nums, topic.gray_queue_nums, topic.lane_slots),
                    gray_queue_nums=topic.gray_queue_nums,
                    perm=topic.perm,
                    lane_slots=topic.lane_slots,
                )
                for b in live
            ]
        else:
            raise NotFound(f"topic {topic_name} is unknown")
        if not brokers:
            raise NotFound(f"no live broker serves topic {topic_name}", detail=refused or None)
        sets = ReplicaSetService(self.session, self.settings).views([b.broker_name for b in brokers])
        for b in brokers:
            if b.broker_name in sets:
                b.replicas = sets[b.broker_name].replicas
        layout = broker_topic_config(topic) if topic is not None else carried[0][1]
        route = TopicRoute(
            topic=topic_name,
            queue_nums=layout.queue_nums,
            gray_queue_nums=layout.gray_queue_nums,
            brokers=brokers,
            lanes={row.lane: row.slot for row in LaneRepository(self.session).slots_of(topic.id)} if topic else {},
        )
        return route, min((b.lease_expires_at - now).total_seconds() for b in live)


def _version(topics: Sequence[Topic], last_deletion_id: int, lanes: dict[str, dict[str, int]]) -> str:
    layout = ";".join(f"{t.name},{t.queue_nums},{t.gray_queue_nums},{t.perm}" + (
        f",{t.lane_slots}" if t.lane_slots != 1 else "") + (
        f",{sorted(lanes[t.name].items())}" if t.name in lanes else "") for t in topics)
    return hashlib.sha256(f"{last_deletion_id}|{layout}".encode()).hexdigest()[:16]
