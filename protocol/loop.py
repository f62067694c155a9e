"""The event loop graymq's processes run on: uvloop when it is installed (the ``fast`` extra), else asyncio's.

uvloop answers an awaited request with fewer loop wake-ups and less Python per socket event than the
default selector loop; nothing in graymq depends on it. ``GRAYMQ_UVLOOP=0`` keeps asyncio's loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when it is installed and not turned off, else None (asyncio's default)."""
    if os.environ.get("GRAYMQ_UVLOOP", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``loop_factory`` chooses."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


def install() -> bool:
    """Make uvloop the loop of every ``asyncio.run`` in this process from now on; whether it is (for a process's
    entry point, before its loop starts)."""
    factory = loop_factory()
    if factory is None:
        return False
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
