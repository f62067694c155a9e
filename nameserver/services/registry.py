"""Broker registration (heartbeats with leases) and topic routes."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import NotFound
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import BrokerHeartbeat, BrokerHeartbeatResponse, BrokerRoute, BrokerView, TopicRoute
from graymq.nameserver.services.views import topic_config
from graymq.nameserver.settings import NameServerSettings


class RegistryService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.brokers = BrokerRepository(session)
        self.topics = TopicRepository(session)

    def heartbeat(self, report: BrokerHeartbeat) -> BrokerHeartbeatResponse:
        """Renew the broker's lease, replace its routes, and hand back every configured topic.

        A topic the broker reports that is not configured yet is recorded with the broker's layout.
        """
        now = utc_now()
        lease = self.settings.broker_lease_seconds
        broker_id = self.brokers.upsert(
            report.broker_name, report.address, now, now + timedelta(seconds=lease)
        )
        self.brokers.replace_routes(broker_id, report.topics)
        self.topics.add_missing(report.topics)
        self.session.commit()
        return BrokerHeartbeatResponse(
            lease_seconds=lease, topics=[topic_config(t) for t in self.topics.all()]
        )

    def live_brokers(self) -> list[BrokerView]:
        now = utc_now()
        topics: dict[int, list[str]] = {}
        for broker, route in self.brokers.live_routes(now):
            topics.setdefault(broker.id, []).append(route.topic)
        return [
            BrokerView(
                broker_name=b.broker_name,
                address=b.address,
                last_heartbeat=b.last_heartbeat,
                lease_expires_at=b.lease_expires_at,
                topics=topics.get(b.id, []),
            )
            for b in self.brokers.live(now)
        ]

    def route(self, topic_name: str) -> TopicRoute:
        """Live brokers carrying the topic; when none reported it yet, every live broker with the
        configured layout (a topic just created reaches them at their next heartbeat)."""
        now = utc_now()
        topic = self.topics.get(topic_name)
        carried = self.brokers.live_routes(now, topic_name)
        if carried:
            brokers = [
                BrokerRoute(
                    broker_name=b.broker_name,
                    address=b.address,
                    queue_nums=r.queue_nums,
                    gray_queue_nums=r.gray_queue_nums,
                    perm=r.perm,
                )
                for b, r in carried
            ]
        elif topic is not None:
            brokers = [
                BrokerRoute(
                    broker_name=b.broker_name,
                    address=b.address,
                    queue_nums=topic.queue_nums,
                    gray_queue_nums=topic.gray_queue_nums,
                    perm=topic.perm,
                )
                for b in self.brokers.live(now)
            ]
        else:
            raise NotFound(f"topic {topic_name} is unknown")
        if not brokers:
            raise NotFound(f"no live broker serves topic {topic_name}")
        layout = topic if topic is not None else carried[0][1]
        return TopicRoute(
            topic=topic_name,
            queue_nums=layout.queue_nums,
            gray_queue_nums=layout.gray_queue_nums,
            brokers=brokers,
        )
