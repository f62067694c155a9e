"""RouteViews: a route is computed once while nothing it depends on changed, its brokers' leases last and it is
young enough."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graymq.nameserver.route_views import REPLICAS_AGE_S, RouteViews
from graymq.nameserver.schemas import BrokerRoute, ReplicaView, TopicRoute
from graymq.nameserver.watch import BROKER_REGISTERED, TOPIC_TABLE_CHANGED

pytestmark = pytest.mark.unit


class Computations:
    """Routes numbered by their computation (``queue_nums``), whose first broker lease ends in ``lease_s``."""

    def __init__(self, lease_s: float = 3600.0, brokers: list[BrokerRoute] | None = None) -> None:
        self.count = 0
        self.lease_s = lease_s
        self.brokers = brokers or []

    def __call__(self) -> tuple[TopicRoute, float]:
        self.count += 1
        return TopicRoute(topic="T", queue_nums=self.count, gray_queue_nums=0, brokers=self.brokers), self.lease_s


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


def test_a_route_is_computed_again_once_the_first_lease_of_its_brokers_ended() -> None:
    """No notification says a lease ended: the route computed before lists the broker until then, not after."""
    views, compute = RouteViews(max_age_s=3600), Computations(lease_s=0.0)
    assert [views.get("T", compute).queue_nums for _ in range(2)] == [1, 2]
    compute.lease_s = 3600.0
    assert [views.get("T", compute).queue_nums for _ in range(2)] == [3, 3]


def test_a_route_listing_replicas_is_served_from_memory_for_a_second_at_most(monkeypatch: pytest.MonkeyPatch
                                                                             ) -> None:
    """Its replicas' liveness and lag change without a notification."""
    import graymq.nameserver.route_views as route_views

    replica = ReplicaView(replica_id=1, address="a:1", leader=True, in_sync=True, live=True, log_end_offset=0,
                          lag_bytes=0, last_heartbeat=datetime.now(UTC))
    broker = BrokerRoute(broker_name="b", address="a:1", queue_nums=4, gray_queue_nums=0, perm=6, replicas=[replica])
    now = [100.0]
    monkeypatch.setattr(route_views.time, "monotonic", lambda: now[0])
    views, compute = RouteViews(max_age_s=3600), Computations(brokers=[broker])
    assert views.get("T", compute).queue_nums == 1
    now[0] += REPLICAS_AGE_S * 0.9
    assert views.get("T", compute).queue_nums == 1
    now[0] += REPLICAS_AGE_S * 0.2
    assert views.get("T", compute).queue_nums == 2


def test_a_route_computed_across_a_change_is_served_but_not_kept() -> None:
    views = RouteViews(max_age_s=3600)
    count = 0

    def racing() -> tuple[TopicRoute, float]:
        nonlocal count
        count += 1
        views.changed({BROKER_REGISTERED})  # committed while the route was being read
        return TopicRoute(topic="T", queue_nums=count, gray_queue_nums=0, brokers=[]), 3600.0

    assert views.get("T", racing).queue_nums == 1
    assert views.get("T", racing).queue_nums == 2


def test_a_failed_computation_is_not_cached() -> None:
    views, compute = RouteViews(max_age_s=3600), Computations()

    def failing() -> tuple[TopicRoute, float]:
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

    def failing() -> tuple[TopicRoute, float]:
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
