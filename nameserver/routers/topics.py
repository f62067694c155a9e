"""Topics and their routes."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from graymq.nameserver.auth import AdminActor
from graymq.nameserver.deps import Registry, Topics
from graymq.nameserver.schemas import TopicPut, TopicRoute, TopicView

router = APIRouter(prefix="/v1/topics", tags=["topics"])


@router.get("")
def list_topics(topics: Topics) -> list[TopicView]:
    return topics.all()


@router.put("/{topic}")
def put_topic(topic: str, body: TopicPut, actor: AdminActor, topics: Topics, response: Response) -> TopicView:
    """Create (201) or change (200) a topic; brokers pick it up at their next heartbeat."""
    view, created = topics.put(topic, body, actor)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return view


@router.get("/{topic}/route")
def topic_route(topic: str, registry: Registry) -> TopicRoute:
    """The live brokers serving the topic and their queue layout."""
    return registry.route(topic)
