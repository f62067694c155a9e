"""A gray job reads exactly the gray queues, a normal job exactly the normal ones; one partition per queue."""

from __future__ import annotations

import pytest

from graymq.client.spark.options import GRAY_FLAG_CONF, with_conf_gray_flag
from graymq.client.sync import SyncProducer
from tests.spark.helpers import send

pytestmark = pytest.mark.spark
GROUP = "SPARK_READ_GROUP"
TOPIC = "SPARK_ORDERS"


def read(spark, options: dict[str, str]):
    return spark.read.format("graymq").options(**options).load()


def test_gray_job_reads_the_gray_queues_and_normal_job_the_normal_queues(cluster, spark):
    cluster.add_broker("broker-a")
    cluster.add_broker("broker-b")
    cluster.create_topic(TOPIC, 6, 2)
    producer = SyncProducer("SPARK_READ_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        gray_ids = send(producer, TOPIC, 24, gray=True, tag="PAID")
        normal_ids = send(producer, TOPIC, 30, gray=False, tag="PAID") + send(producer, TOPIC, 10, gray=False,
                                                                                tag="REFUND")
    finally:
        producer.stop()
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "group": GROUP}

    spark.conf.set(GRAY_FLAG_CONF, "true")
    try:
        gray = read(spark, with_conf_gray_flag(spark, options))
    finally:
        spark.conf.unset(GRAY_FLAG_CONF)
    normal = read(spark, {**options, "GRAYFLAG": "false"})  # option names are case-insensitive

    assert gray.rdd.getNumPartitions() == 2 * 2, "one partition per gray queue of each broker"
    assert normal.rdd.getNumPartitions() == 2 * 4, "one partition per normal queue of each broker"
    gray_rows = gray.select("msg_id", "broker", "queue_id", "gray", "tags").collect()
    normal_rows = normal.select("msg_id", "broker", "queue_id", "gray", "body").collect()
    assert sorted(r.msg_id for r in gray_rows) == sorted(gray_ids)
    assert sorted(r.msg_id for r in normal_rows) == sorted(normal_ids)
    assert {(r.broker, r.queue_id) for r in gray_rows} <= {(b, q) for b in ("broker-a", "broker-b") for q in (0, 5)}
    assert all(r.gray and r.tags == "PAID" for r in gray_rows)
    assert not any(r.gray or r.queue_id in (0, 5) for r in normal_rows)

    refunds = read(spark, {**options, "expression": "REFUND"}).select("msg_id").collect()
    assert sorted(r.msg_id for r in refunds) == sorted(normal_ids[30:]), "the tag expression filters"


def test_bad_options_are_clear_errors(spark):
    with pytest.raises(Exception, match="option group is required"):
        read(spark, {"nameserver": "http://127.0.0.1:1", "topic": TOPIC}).collect()
    with pytest.raises(Exception, match="unknown graymq option"):
        read(spark, {"nameserver": "http://127.0.0.1:1", "topic": TOPIC, "group": GROUP, "grayflg": "true"}).collect()
