"""Topic configuration (created, changed or deleted by operators)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import Conflict, NotFound
from graymq.nameserver.models import Topic
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.deletions import DeletionRepository
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import TopicConfig, TopicPut, TopicView
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.views import topic_config, topic_view
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import TOPIC_TABLE_CHANGED, mark_changed


class TopicService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.topics = TopicRepository(session)
        self.brokers = BrokerRepository(session)
        self.deletions = DeletionRepository(session)
        self.audit = AuditService(session)

    def all(self) -> list[TopicView]:
        return [topic_view(t) for t in self.topics.all()]

    def put(self, name: str, body: TopicPut, actor: str) -> tuple[TopicView, bool]:
        """Create or change a topic; returns its view and whether it was created.

        A topic never shrinks (409): its queues hold messages and consumer offsets, and brokers refuse it.
        """
        config = TopicConfig(topic=name, **body.model_dump(exclude={"reason"}))
        created = bool(self.topics.add_missing([config]))
        topic = self.topics.get(name, lock=True)
        assert topic is not None
        if config.queue_nums < topic.queue_nums:
            raise Conflict(
                f"topic {name} has {topic.queue_nums} queues per broker and cannot shrink to {config.queue_nums} "
                "(its queues hold messages and offsets): keep the count, or create a new topic",
                {"topic": name, "queue_nums": topic.queue_nums, "requested_queue_nums": config.queue_nums},
            )
        if not created:
            self._check_lanes_kept(topic, config)
        before = None if created else topic_config(topic).model_dump()
        topic.queue_nums, topic.gray_queue_nums, topic.perm, topic.lane_slots = (
            config.queue_nums,
            config.gray_queue_nums,
            config.perm,
            config.lane_slots,
        )
        self.session.flush()
        after = config.model_dump()
        if before != after:
            mark_changed(self.session, TOPIC_TABLE_CHANGED)
        self.audit.record(
            actor=actor,
            object_type="topic",
            object_id=name,
            action="create" if created else "update",
            before=before,
            after=after,
            reason=body.reason,
        )
        self.session.commit()
        return topic_view(topic), created

    @staticmethod
    def _check_lanes_kept(topic: Topic, config: TopicConfig) -> None:
        """409 for a change that would move a lane slot's queues: fewer slots, or (with more than one slot) another
        base or gray count, since slots past the first are appended after the base queues (docs/lanes.md)."""
        if config.lane_slots < topic.lane_slots:
            raise Conflict("CONFLICT", f"topic {topic.name} has {topic.lane_slots} lane slots and cannot shrink to "
                           f"{config.lane_slots} (lanes hold their queues): keep {topic.lane_slots} or more")
        layout = (config.queue_nums, config.gray_queue_nums)
        if max(topic.lane_slots, config.lane_slots) > 1 and layout != (topic.queue_nums, topic.gray_queue_nums):
            raise Conflict("CONFLICT", f"topic {topic.name} has lane slots: its {topic.queue_nums} queues and "
                           f"{topic.gray_queue_nums} gray queues cannot change (each slot's queues would move): "
                           "create a new topic for another layout")

    def delete(self, name: str, actor: str, reason: str | None) -> None:
        """Delete a topic no live client uses (409 naming them otherwise); brokers drop it at their next
        registration. Audited."""
        self.brokers.lock_all()
        topic = self.topics.get(name, lock=True)
        if topic is None:
            raise NotFound(f"topic {name} is unknown")
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        users = self.topics.live_users(name, seen_after)
        if users:
            listed = ", ".join(f"{client_id} ({role} of {group})" for group, client_id, role in users)
            raise Conflict(
                f"topic {name} is in use by {len(users)} live client(s): {listed}; stop them first "
                f"(a client stopped without a clean exit is forgotten {self.settings.client_expiry_seconds} s "
                "after its last heartbeat)",
                {"topic": name, "clients": [{"group": g, "client_id": c, "role": r} for g, c, r in users],
                 "client_expiry_seconds": self.settings.client_expiry_seconds},
            )
        before = topic_config(topic).model_dump()
        self.delete_unchecked([name])
        self.audit.record(
            actor=actor, object_type="topic", object_id=name, action="delete", before=before, reason=reason
        )
        self.session.commit()

    def delete_unchecked(self, names: list[str]) -> None:
        """Delete ``names`` (configured or not) in the caller's transaction, which must hold ``lock_all`` of the
        brokers: their routes go now, and the deletion log tells brokers to drop them."""
        now = utc_now()
        self.topics.delete(names)
        self.brokers.delete_routes_of(names)
        for name in names:
            self.deletions.add("topic", name, now)
        mark_changed(self.session, TOPIC_TABLE_CHANGED)
