"""A cProfile of the serving broker, for the benchmarks only: with ``GRAYMQ_BROKER_PROFILE`` set to a file path,
SIGUSR1 starts profiling and SIGUSR2 stops it and writes the stats there (``pstats`` format; the times are the
event loop thread's CPU, not wall time), so a bench profiles exactly the window it measures. Without the variable
nothing is installed and the signals keep their defaults."""

from __future__ import annotations

import asyncio
import cProfile
import logging
import os
import signal
import time

log = logging.getLogger(__name__)
ENV = "GRAYMQ_BROKER_PROFILE"


def install(loop: asyncio.AbstractEventLoop) -> None:
    """SIGUSR1 / SIGUSR2 start / stop-and-dump a profile when ``GRAYMQ_BROKER_PROFILE`` names a file."""
    path = os.environ.get(ENV, "")
    if not path:
        return
    profiler = cProfile.Profile(time.thread_time)  # CPU, not wall: a write that wakes the peer is not charged its run

    def stop() -> None:
        profiler.disable()
        profiler.dump_stats(path)
        profiler.clear()
        log.warning("broker profile written to %s", path)

    loop.add_signal_handler(signal.SIGUSR1, profiler.enable)
    loop.add_signal_handler(signal.SIGUSR2, stop)
    log.warning("broker profiling armed (%s): SIGUSR1 starts, SIGUSR2 writes %s", ENV, path)
