"""A SparkSession for running on one machine: loopback only, no web UI, workers on this interpreter.

Spark's defaults suit a cluster, not a laptop or a test: the driver binds the machine's
outward address (``SPARK_LOCAL_IP`` defaults to 127.0.0.1 here), the UI takes port 4040, and
Python workers start ``python3`` from PATH, which may not have graymq installed.
``local_session`` changes only what the caller's Spark conf (``spark-submit --conf``,
``spark-defaults.conf``) leaves unset.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

LOCAL_DEFAULTS = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
}
# Set whatever the conf says: PySpark's own launcher turns the progress bar on, which garbles logs.
ALWAYS = {"spark.ui.showConsoleProgress": "false"}


def local_session(app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN") -> Any:
    """``SparkSession`` with ``LOCAL_DEFAULTS`` under ``conf`` (both under the submitted conf).

    ``master`` is applied only when ``spark-submit`` gave none; workers run ``sys.executable``
    unless ``PYSPARK_PYTHON`` says otherwise.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    SparkContext._ensure_initialized()  # the JVM holds what spark-submit and spark-defaults.conf set
    submitted = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master and not submitted.contains("spark.master"):
        builder = builder.master(master)
    for key, value in {**LOCAL_DEFAULTS, **(conf or {})}.items():
        if not submitted.contains(key):
            builder = builder.config(key, value)
    for key, value in ALWAYS.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
