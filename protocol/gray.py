"""The gray queue layout: which queue ids of a topic (per broker) carry gray traffic.

Producer, consumer, broker and the Spark source all call these functions; nothing else
computes the layout.
"""

from __future__ import annotations


def gray_queue_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    """Gray queue ids: the first ``ceil(g/2)`` and the last ``floor(g/2)`` of ``queue_nums`` queues.

    >>> gray_queue_ids(6, 2)
    (0, 5)
    >>> gray_queue_ids(8, 3)
    (0, 1, 7)
    >>> gray_queue_ids(4, 0)
    ()
    """
    if isinstance(queue_nums, bool) or not isinstance(queue_nums, int):
        raise TypeError(f"queue_nums must be an int, got {type(queue_nums).__name__}")
    if isinstance(gray_queue_nums, bool) or not isinstance(gray_queue_nums, int):
        raise TypeError(f"gray_queue_nums must be an int, got {type(gray_queue_nums).__name__}")
    if queue_nums < 0:
        raise ValueError(f"queue_nums must be >= 0, got {queue_nums}")
    if gray_queue_nums < 0:
        raise ValueError(f"gray_queue_nums must be >= 0, got {gray_queue_nums}")
    if gray_queue_nums > queue_nums:
        raise ValueError(f"gray_queue_nums ({gray_queue_nums}) exceeds queue_nums ({queue_nums})")
    head = (gray_queue_nums + 1) // 2
    tail = gray_queue_nums // 2
    return tuple(range(head)) + tuple(range(queue_nums - tail, queue_nums))


def normal_queue_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    """The queue ids that are not gray, ascending."""
    gray = set(gray_queue_ids(queue_nums, gray_queue_nums))
    return tuple(q for q in range(queue_nums) if q not in gray)


def is_gray_queue(queue_id: int, queue_nums: int, gray_queue_nums: int) -> bool:
    """Whether ``queue_id`` is one of the gray queues of the layout."""
    if not 0 <= queue_id < queue_nums:
        raise ValueError(f"queue_id {queue_id} outside 0..{queue_nums - 1}")
    return queue_id in gray_queue_ids(queue_nums, gray_queue_nums)
