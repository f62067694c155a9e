"""Which side (gray or normal) one send takes: the release decides, a message's mark only asks.

A send has up to three sources of gray: the producer's flag (``desired_gray`` from the name
server: explicit per-client value, gray rules, ``--gray`` at start), the message's explicit mark
(``Message(gray=...)``) and the propagated mark (the message being handled, see
``client/context.py``). The name server says, per producer, whether marks are honoured
(``gray_marks``): only while the producer group's gray switch is on, no RUNNING promote or
rollback covers the producer group, and the producer has no explicit normal flag.

=====================  ==========  =============  ==========================  ==========================
source                 switch off  release on     promote/rollback RUNNING    released (flipped normal)
=====================  ==========  =============  ==========================  ==========================
producer flag gray     normal      gray           normal (flipped first)      normal
explicit mark gray     normal      gray           normal                      normal
explicit mark normal   normal      normal         normal                      normal
propagated mark gray   normal      gray           normal                      normal
=====================  ==========  =============  ==========================  ==========================

An explicit normal mark is always honoured (normal is always safe). With marks honoured an explicit
gray mark wins, then the propagated mark, then the producer's flag; without them the producer's flag
alone decides (a producer made gray by a rule or ``--gray`` opens the next release).

With lanes (docs/lanes.md) "gray" reads "a lane", and a promote or rollback freezes the marks of its own lane only
(``frozen``): a mark naming a frozen lane is not honoured, the send goes as the producer's flag says, while marks
of the other lanes still are.
"""

from __future__ import annotations

from collections.abc import Collection

from graymq.core.queue_layout import GRAY_LANE

Mark = bool | str | None
"""A message's mark or a producer's flag: ``None`` no mark, ``False`` base, ``True`` the ``gray`` lane, or a lane."""


def mark_lane(mark: Mark) -> str | None:
    """The lane a mark names: ``True`` is ``gray``; ``False``/``None`` name none."""
    return GRAY_LANE if mark is True else (mark or None)


def send_lane(producer_lane: Mark, explicit_mark: Mark, propagated_mark: Mark, marks_honoured: bool,
              gray_switch: bool, frozen: Collection[str] = ()) -> str | None:
    """The lane a send goes to (None: base), by the table above with "gray" read as "a lane": the explicit mark's
    lane, else the propagated mark's, else the producer's lane; a mark naming a lane in ``frozen`` is not honoured.

    >>> send_lane("v3", None, "v2", marks_honoured=True, gray_switch=True)
    'v2'
    >>> send_lane("v3", None, "v2", marks_honoured=False, gray_switch=True)
    'v3'
    >>> send_lane(None, "v2", None, marks_honoured=True, gray_switch=True, frozen={"v2"}) is None
    True
    >>> send_lane(None, "v3", None, marks_honoured=True, gray_switch=True, frozen={"v2"})
    'v3'
    >>> send_lane(True, False, None, marks_honoured=True, gray_switch=True) is None
    True
    """
    if not gray_switch or explicit_mark is False:
        return None
    mark = explicit_mark or propagated_mark
    if marks_honoured and mark is not None and mark_lane(mark) not in frozen:
        return mark_lane(mark)
    return mark_lane(producer_lane)


def send_side(producer_gray: bool, explicit_mark: bool | None, propagated_mark: bool | None,
              marks_honoured: bool, gray_switch: bool) -> bool:
    """True when the send goes to the gray queues.

    >>> send_side(False, True, None, marks_honoured=True, gray_switch=True)
    True
    >>> send_side(False, True, None, marks_honoured=False, gray_switch=True)
    False
    >>> send_side(True, False, None, marks_honoured=False, gray_switch=True)
    False
    >>> send_side(True, None, None, marks_honoured=False, gray_switch=False)
    False
    """
    return send_lane(producer_gray, explicit_mark, propagated_mark, marks_honoured, gray_switch) is not None
