"""The fleet bench's make-up, as issue 45 specifies it: a tenth of the clients stock SDK clients (in groups of their
own, the big group graymq's), a fifth of every kind gray, and the stock clients' pods holding the gray ones apart."""

from __future__ import annotations

import doctest
from collections import Counter

import pytest

from graymq.bench import bench_fleet, fleet_stock
from graymq.bench.bench_fleet import BIG_GROUP, fleet_specs, stock_groups
from graymq.bench.fleet_stock import GRAY_HOST, PODS, STOCK_KINDS, is_pod_host, pod_specs

pytestmark = pytest.mark.unit

SIZES = [(5000, 50), (1000, 10), (200, 6)]


@pytest.mark.parametrize(("clients", "groups"), SIZES)
def test_a_tenth_are_stock_clients_in_groups_of_their_own_and_the_big_group_is_graymq(clients: int, groups: int
                                                                                         ) -> None:
    specs = fleet_specs(clients, groups)
    stock = [s for s in specs if s[0] in STOCK_KINDS]
    assert len(specs) == clients and len(stock) == clients // 10
    kinds = Counter(s[0] for s in specs)
    assert kinds["stock_producer"] == (kinds["producer"] + kinds["stock_producer"]) // 10
    assert {s[0] for s in specs if s[2] == BIG_GROUP} == {"consumer"}
    assert sum(s[2] == BIG_GROUP for s in specs) == min(500, clients * 4 // 5 * 5 // 8)
    consumer_groups = {kind: {s[2] for s in specs if s[0] == kind} for kind in ("consumer", "stock_simple")}
    assert not consumer_groups["consumer"] & consumer_groups["stock_simple"]  # no group mixes the two
    assert len(consumer_groups["consumer"] | consumer_groups["stock_simple"]) == groups
    assert len(consumer_groups["stock_simple"]) >= 2
    assert stock_groups(specs) == sorted(consumer_groups["stock_simple"] | {s[3] for s in stock
                                                                            if s[0] == "stock_producer"})


@pytest.mark.parametrize(("clients", "groups"), SIZES)
def test_a_fifth_of_each_kind_is_gray_and_of_each_stock_group_of_five_or_more(clients: int, groups: int) -> None:
    specs = fleet_specs(clients, groups)
    for kind in ("consumer", "producer", *STOCK_KINDS):
        of_kind = [s for s in specs if s[0] == kind]
        assert sum(s[4] for s in of_kind) == (len(of_kind) + 4) // 5, kind  # every fifth, the first one gray
    for group in stock_groups(specs):
        members = [s for s in specs if s[2] == group]
        assert sum(s[4] for s in members) <= (len(members) + 4) // 5, group
        assert sum(s[4] for s in members) or len(members) < 5, group


def test_the_full_fleet_has_500_stock_clients_100_of_them_gray() -> None:
    stock = [s for s in fleet_specs(5000, 50) if s[0] in STOCK_KINDS]
    assert (len(stock), sum(s[4] for s in stock)) == (500, 100)


@pytest.mark.parametrize(("clients", "groups"), SIZES)
def test_the_gray_pod_holds_the_gray_stock_clients_and_every_stock_client_has_one_pod(clients: int, groups: int
                                                                                        ) -> None:
    specs = fleet_specs(clients, groups)
    pods = pod_specs(specs)
    assert 2 <= len(pods) <= PODS and all(is_pod_host(host) for host, _ in pods)
    assert len({host for host, _ in pods}) == len(pods)
    placed = [s for _, pod in pods for s in pod]
    assert sorted(placed) == sorted(s for s in specs if s[0] in STOCK_KINDS)
    hosts = dict(pods)
    assert all(s[4] for s in hosts[GRAY_HOST]) and not any(s[4] for host, pod in pods if host != GRAY_HOST
                                                          for s in pod)


def test_the_gray_rule_matches_the_gray_pod_only() -> None:
    from graymq.nameserver.gray_policy import rule_matches

    hosts = [host for host, _ in pod_specs(fleet_specs(1000, 10))]
    assert [rule_matches(fleet_stock.GRAY_RULE, {"host": host}) for host in hosts] == [True] + [False] * (
        len(hosts) - 1)


@pytest.mark.parametrize("module", [bench_fleet, fleet_stock])
def test_doctests(module: object) -> None:
    assert doctest.testmod(module).failed == 0
