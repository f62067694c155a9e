"""Topic configuration (created or changed by operators)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from graymq.nameserver.errors import InvalidInput
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.schemas import TopicConfig, TopicPut, TopicView
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.views import topic_config, topic_view
from graymq.protocol.constants import check_topic_name


class TopicService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.topics = TopicRepository(session)
        self.audit = AuditService(session)

    def all(self) -> list[TopicView]:
        return [topic_view(t) for t in self.topics.all()]

    def put(self, name: str, body: TopicPut, actor: str) -> tuple[TopicView, bool]:
        """Create or change a topic; returns its view and whether it was created."""
        problem = check_topic_name(name)
        if problem:
            raise InvalidInput(["path", "topic"], problem)
        config = TopicConfig(topic=name, **body.model_dump(exclude={"reason"}))
        created = bool(self.topics.add_missing([config]))
        topic = self.topics.get(name, lock=True)
        assert topic is not None
        before = None if created else topic_config(topic).model_dump()
        topic.queue_nums, topic.gray_queue_nums, topic.perm = (
            config.queue_nums,
            config.gray_queue_nums,
            config.perm,
        )
        self.session.flush()
        after = config.model_dump()
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
