"""A ``StreamingJob`` run on a thread of its own for the length of a test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graymq.client.spark import StreamingJob


@contextmanager
def running(spark: Any, job: StreamingJob) -> Iterator[StreamingJob]:
    """``job.run`` on a thread (the session made active there, as Spark wants off the main thread) until the block
    ends; a failure of the job is raised then."""
    stop, failure = threading.Event(), []

    def run() -> None:
        spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            job.run(stop)
        except BaseException as exc:  # raised below, after the block
            failure.append(exc)

    runner = threading.Thread(target=run, name="spark-job")
    runner.start()
    try:
        yield job
    finally:
        stop.set()
        runner.join(120)
    assert not failure, failure
