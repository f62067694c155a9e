"""RouteViews: a route is computed once while nothing it depends on changed and it is young enough."""

from __future__ import annotations

import pytest

from graymq.nameserver.route_views import RouteViews
from graymq.nameserver.schemas import TopicRoute
from graymq.nameserver.watch import BROKER_REGISTERED, TOPIC_TABLE_CHANGED

pytestmark = pytest.mark.unit


class Computations:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> TopicRoute:
        self.count += 1
        return TopicRoute(topic="T", queue_nums=self.count, gray_queue_nums=0, brokers=[])


def test_a_route_is_computed_once_until_something_it_depends_on_changes() -> None:
    views, compute = RouteViews(max_age_s=3600), Computations()
    assert views.get("T", compute).queue_nums == 1
    assert views.get("T", compute).queue_nums == 1
    views.changed({"some_group"})  # a group's change: routes do not depend on it
    assert views.get("T", compute).queue_nums == 1
    for keys in ({BROKER_REGISTERED}, {TOPIC_TABLE_CHANGED, "g"}, None):
        views.changed(keys)
        assert views.get("T", compute).queue_nums == compute.count
    assert compute.count == 4


def test_a_route_older_than_its_bound_is_computed_again() -> None:
    views, compute = RouteViews(max_age_s=0.0), Computations()
    assert [views.get("T", compute).queue_nums for _ in range(3)] == [1, 2, 3]


def test_a_route_computed_across_a_change_is_served_but_not_kept() -> None:
    views = RouteViews(max_age_s=3600)
    count = 0

    def racing() -> TopicRoute:
        nonlocal count
        count += 1
        views.changed({BROKER_REGISTERED})  # committed while the route was being read
        return TopicRoute(topic="T", queue_nums=count, gray_queue_nums=0, brokers=[])

    assert views.get("T", racing).queue_nums == 1
    assert views.get("T", racing).queue_nums == 2


def test_a_failed_computation_is_not_cached() -> None:
    views, compute = RouteViews(max_age_s=3600), Computations()

    def failing() -> TopicRoute:
        raise LookupError("unknown topic")

    with pytest.raises(LookupError):
        views.get("T", failing)
    assert views.get("T", compute).queue_nums == 1


def test_requests_arriving_during_a_failing_computation_share_its_error_instead_of_queueing() -> None:
    """A database that fails after a while: the waiting requests get the first computation's error, they do not
    each compute (and wait) in turn."""
    import threading

    views, release, arrived = RouteViews(max_age_s=3600), threading.Event(), threading.Semaphore(0)
    computed = []

    def failing() -> TopicRoute:
        computed.append(1)
        release.wait(10)
        raise ConnectionError("database unreachable")

    errors: list[BaseException] = []

    def ask() -> None:
        arrived.release()
        try:
            views.get("T", failing)
        except ConnectionError as exc:
            errors.append(exc)

    leader = threading.Thread(target=ask)
    leader.start()
    arrived.acquire()
    while not computed:
        threading.Event().wait(0.001)
    followers = [threading.Thread(target=ask) for _ in range(9)]
    for thread in followers:
        thread.start()
    for _ in followers:
        arrived.acquire()
    threading.Event().wait(0.05)  # the followers reach the flight's wait
    release.set()
    for thread in (leader, *followers):
        thread.join(10)
    assert len(errors) == 10 and len(computed) == 1
    assert views.get("T", Computations()).queue_nums == 1  # the error was not cached
