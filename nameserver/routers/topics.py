"""Topics and their routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from graymq.nameserver.auth import AdminActor, Authenticated, Caller, check_route
from graymq.nameserver.deps import Topics
from graymq.nameserver.errors import ApiError
from graymq.nameserver.refused_registrations import RefusedRegistrations, refusal_text
from graymq.nameserver.route_views import RouteViews
from graymq.nameserver.schemas import (
    MAX_WATCH_S,
    TopicConfig,
    TopicPath,
    TopicPut,
    TopicPutResult,
    TopicRoute,
    TopicRouteResult,
    TopicRoutesQuery,
    TopicRoutesResponse,
    TopicView,
)
from graymq.nameserver.services.registry import RegistryService
from graymq.nameserver.services.topics import TopicService
from graymq.nameserver.topic_readiness import wait_until_served

router = APIRouter(prefix="/v1/topics", tags=["topics"])
# Several topics' routes: a path of its own, so that a name server from before it answers 404 (clients then ask topic
# by topic), where under /v1/topics it would be a topic's path answering 405.
routes_router = APIRouter(prefix="/v1/topic-routes", tags=["topics"])


@router.get("")
def list_topics(topics: Topics) -> list[TopicView]:
    return topics.all()


@router.put("/{topic}")
async def put_topic(
    topic: TopicPath,
    body: TopicPut,
    actor: AdminActor,
    request: Request,
    response: Response,
    wait_s: Annotated[
        float, Query(ge=0, le=MAX_WATCH_S, description="wait up to this long for every live broker to serve it")
    ] = 0.0,
) -> TopicPutResult:
    """Create (201) or change (200) a topic; 409 when it would shrink. Brokers pick it up at once (their watch
    wakes them) or at their next registration; the answer lists the live brokers that already serve it with
    this layout and those that do not yet (after waiting up to ``wait_s`` for them)."""
    state = request.app.state

    def put() -> tuple[TopicView, bool]:
        with state.sessions() as session:
            return TopicService(session, state.settings).put(topic, body, actor)

    view, created = await run_in_threadpool(put)
    if created:
        response.status_code = status.HTTP_201_CREATED
    config = TopicConfig(**view.model_dump(include=set(TopicConfig.model_fields)))
    ready, pending = await wait_until_served(state, config, wait_s)
    return TopicPutResult(**view.model_dump(), brokers_ready=ready, brokers_pending=pending)


@router.delete("/{topic}", status_code=status.HTTP_204_NO_CONTENT)
def delete_topic(
    topic: TopicPath,
    actor: AdminActor,
    topics: Topics,
    reason: Annotated[str | None, Query(max_length=2000)] = None,
) -> None:
    """Delete a topic (404 unknown, 409 while live clients use it); brokers drop it at their next
    registration. Audited."""
    topics.delete(topic, actor, reason)


@routes_router.post("")
async def topic_routes(body: TopicRoutesQuery, caller: Authenticated, request: Request) -> TopicRoutesResponse:
    """Several topics' routes in one request, each as ``GET /v1/topics/{topic}/route`` answers it (a topic refused,
    unknown or without a live broker gets its error in its result): a process's clients refresh every topic they
    use at once, where one request a topic cost the name server more than computing the routes."""
    results = []
    for topic in body.topics:
        try:
            results.append(TopicRouteResult(route=await _route(topic, caller, request)))
        except ApiError as refused:
            results.append(TopicRouteResult(status_code=refused.status_code, error=refused.error,
                                            detail=refused.detail))
    return TopicRoutesResponse(results=results)


@router.get("/{topic}/route")
async def topic_route(topic: TopicPath, caller: Authenticated, request: Request) -> TopicRoute:
    """The live brokers serving the topic and their queue layout (for a caller that may produce or consume it).

    Served from memory (``RouteViews``), without a trip through the thread pool: a change of brokers or topics
    shows at once, an expired lease as it ends. Registrations refused lately are listed
    (``refused_registrations``), and are the detail of a "no live broker serves topic" answer."""
    return await _route(topic, caller, request)


async def _route(topic: str, caller: Caller, request: Request) -> TopicRoute:
    check_route(caller, topic)
    state = request.app.state
    views: RouteViews = state.route_views
    refused: RefusedRegistrations = state.refused_registrations
    route = views.cached(topic)
    if route is None:
        def compute() -> tuple[TopicRoute, float]:
            with state.read_sessions() as session:
                return RegistryService(session, state.settings).routed(topic, refusal_text(refused.current()))

        route = await run_in_threadpool(views.get, topic, compute)
    refusals = refused.current()  # not cached with the route: shown as soon as made, gone once the broker registers
    return route.model_copy(update={"refused_registrations": refusals}) if refusals else route
