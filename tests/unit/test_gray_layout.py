"""The one gray queue layout function: first ceil(g/2) and last floor(g/2) queue ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.core.queue_layout import gray_queue_ids, is_gray_queue, normal_queue_ids

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("queue_nums", "gray_nums", "expected"),
    [
        (6, 2, (0, 5)),
        (8, 3, (0, 1, 7)),
        (8, 0, ()),
        (0, 0, ()),
        (1, 1, (0,)),
        (4, 4, (0, 1, 2, 3)),
        (5, 1, (0,)),
        (16, 4, (0, 1, 14, 15)),
    ],
)
def test_gray_queue_ids_table(queue_nums, gray_nums, expected):
    assert gray_queue_ids(queue_nums, gray_nums) == expected


def test_normal_queues_are_the_middle():
    assert normal_queue_ids(6, 2) == (1, 2, 3, 4)
    assert normal_queue_ids(8, 3) == (2, 3, 4, 5, 6)


@pytest.mark.parametrize(
    ("queue_nums", "gray_nums", "message"),
    [(4, 5, "exceeds"), (-1, 0, "queue_nums must be >= 0"), (4, -1, "gray_queue_nums must be >= 0")],
)
def test_invalid_layouts_are_rejected_with_a_clear_error(queue_nums, gray_nums, message):
    with pytest.raises(ValueError, match=message):
        gray_queue_ids(queue_nums, gray_nums)


def test_non_integers_are_rejected():
    with pytest.raises(TypeError):
        gray_queue_ids(6.0, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gray_queue_ids(6, True)


@given(n=st.integers(0, 64), data=st.data())
def test_gray_and_normal_sets_partition_the_queues(n, data):
    g = data.draw(st.integers(0, n))
    gray = gray_queue_ids(n, g)
    normal = normal_queue_ids(n, g)
    assert len(gray) == g
    assert sorted(gray + normal) == list(range(n))
    assert all(is_gray_queue(q, n, g) for q in gray)
    assert not any(is_gray_queue(q, n, g) for q in normal)
