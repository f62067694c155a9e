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
"""

from __future__ import annotations


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
    if not gray_switch or explicit_mark is False:
        return False
    if marks_honoured:
        if explicit_mark:
            return True
        if propagated_mark is not None:
            return propagated_mark
    return producer_gray
