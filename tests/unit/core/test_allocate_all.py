"""``allocate_all``: every client's share of a group in one pass, exactly what ``allocate`` gives each client."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.core.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueGray,
    ConsumerView,
    allocate_all,
)
from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import FREE_SLOT

pytestmark = pytest.mark.unit

LANES = (GRAY_LANE, "v2", "v3")


class OnlyAllocate:
    """A user's strategy: ``allocate`` alone (contiguous blocks from the end), no ``allocate_all``."""

    def allocate(self, group: str, client_id: str, queues: Sequence[MessageQueue],
                 clients: Sequence[ConsumerView]) -> list[MessageQueue]:
        ordered = sorted({c.client_id for c in clients})
        if client_id not in ordered:
            return []
        return sorted(queues, reverse=True)[ordered.index(client_id)::len(ordered)]


BASES = (AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle, OnlyAllocate)

queue_sets = st.lists(st.tuples(st.sampled_from(("broker-a", "broker-b")), st.integers(0, 15)), max_size=24).map(
    lambda pairs: [MessageQueue("T", broker, q) for broker, q in pairs])  # duplicates too
client_views = st.lists(st.builds(ConsumerView, st.sampled_from([f"c{i}" for i in range(12)]), st.booleans(),
                                  st.sampled_from((None, *LANES))), max_size=16)  # the same id twice: a duplicated view


@st.composite
def gray_strategies(draw: st.DrawFn) -> AllocateMessageQueueGray:
    lanes = draw(st.dictionaries(st.integers(0, 15), st.sampled_from((*LANES, FREE_SLOT))))
    weighted = draw(st.dictionaries(st.integers(0, 15), st.sampled_from(LANES)))
    return AllocateMessageQueueGray(
        lambda mq: lanes.get(mq.queue_id) == GRAY_LANE, draw(st.sampled_from(BASES))(),
        orphan_policy=draw(st.sampled_from(("hold", "adopt"))), gray_switch=draw(st.booleans()),
        lane_of=lambda mq: lanes.get(mq.queue_id), weighted_lane=lambda mq: weighted.get(mq.queue_id),
        lane_policies=draw(st.dictionaries(st.sampled_from(LANES), st.sampled_from(("hold", "adopt")))))


def each_client(strategy, queues: list[MessageQueue], clients: list[ConsumerView]) -> dict[str, list[MessageQueue]]:
    return {c.client_id: strategy.allocate("G", c.client_id, queues, clients) for c in clients}


@settings(max_examples=300)
@given(gray_strategies(), queue_sets, client_views)
def test_the_gray_strategy_gives_every_client_in_one_pass_what_it_gives_each(
        strategy: AllocateMessageQueueGray, queues: list[MessageQueue], clients: list[ConsumerView]) -> None:
    assert allocate_all(strategy, "G", queues, clients) == each_client(strategy, queues, clients)


@settings(max_examples=200)
@given(st.sampled_from(BASES), queue_sets, client_views)
def test_a_base_strategy_gives_every_client_in_one_pass_what_it_gives_each(
        base: type, queues: list[MessageQueue], clients: list[ConsumerView]) -> None:
    strategy = base()
    assert allocate_all(strategy, "G", queues, clients) == each_client(strategy, queues, clients)


def test_a_client_not_in_the_group_gets_no_share() -> None:
    clients = [ConsumerView("a"), ConsumerView("b", gray=True)]
    shares = allocate_all(AllocateMessageQueueGray(lambda mq: mq.queue_id == 0), "G",
                          [MessageQueue("T", "broker-a", q) for q in range(4)], clients)
    assert set(shares) == {"a", "b"} and shares["b"] == [MessageQueue("T", "broker-a", 0)]
