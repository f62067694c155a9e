"""The group view from the brokers' listings: the latest heartbeat wins, and one view is built per membership."""

from __future__ import annotations

import pytest

from graymq.client.consumer.group_view import group_view
from graymq.protocol import graymq_pb2 as pb

pytestmark = pytest.mark.unit


def listing(*clients: tuple[str, bool, int, list[str]]) -> pb.ConsumerListResponse:
    return pb.ConsumerListResponse(clients=[pb.ClientInfo(client_id=cid, gray_flag=gray, last_heartbeat_ms=at,
                                                          topics=topics) for cid, gray, at, topics in clients])


def test_where_brokers_disagree_the_latest_heartbeat_wins() -> None:
    _, view = group_view("G", {"b1:1": listing(("a", False, 10, ["T"]), ("b", True, 20, [])),
                          "b2:1": listing(("a", True, 30, ["T", "U"]), ("b", False, 5, ["T"]))})
    assert view == {"a": (True, {"T", "U"}), "b": (True, None)}


def test_the_consumers_of_a_process_share_the_view_of_the_same_listings() -> None:
    first_key, first = group_view("G", {"b1:1": listing(("a", False, 10, ["T"]))})
    again_key, again = group_view("G", {"b1:1": listing(("a", False, 10, ["T"]))})  # another member's read
    assert again is first and again_key == first_key
    changed_key, changed = group_view("G", {"b1:1": listing(("a", False, 10, ["T"]), ("c", False, 11, ["T"]))})
    assert changed_key != first_key and set(changed) == {"a", "c"}


def test_listings_differing_in_heartbeat_times_only_give_one_view_and_one_membership() -> None:
    first_key, first = group_view("G", {"b1:1": listing(("a", False, 10, ["T"]), ("b", True, 10, ["T"]))})
    later_key, later = group_view("G", {"b1:1": listing(("a", False, 40, ["T"]), ("b", True, 41, ["T"]))})
    assert later is first and later_key is first_key
    moved_key, moved = group_view("G", {"b1:1": listing(("a", True, 50, ["T"]), ("b", True, 51, ["T"]))})
    assert moved_key != first_key and moved == {"a": (True, {"T"}), "b": (True, {"T"})}


def test_each_group_keeps_its_views_however_many_groups_the_process_consumes() -> None:
    """A process consuming fifty groups: a consumer reading its group's listings after every other group's
    consumers read theirs still finds the view built for them."""
    listings = {f"G{i}": {"b1:1": listing((f"c{i}", False, 10, ["T"]))} for i in range(50)}
    first = {group: group_view(group, read)[1] for group, read in listings.items()}
    assert all(group_view(group, read)[1] is first[group] for group, read in listings.items())
