"""``df.write.format("graymq")``: columns checked before anything is sent, a failed write says what it stored,
a write repeated under its ``writeId`` stores nothing twice."""

from __future__ import annotations

import pytest

from tests.spark.sink_helpers import bodies, stored_rows

pytestmark = pytest.mark.spark
TOPIC = "SINK_BATCH"
NOWHERE = "http://127.0.0.1:1"  # nothing listens: a write that got as far as sending would fail otherwise


def write(frame, **options: str) -> None:
    frame.write.format("graymq").options(**options).mode("append").save()


@pytest.mark.parametrize(("select", "error"), [
    (["cast(id as string) as text"], "column body (binary or string) is missing"),
    (["id as body"], "column body must be binary or string, not bigint"),
    (["cast(id as string) as body", "cast(id as string) as keys"], "column keys must be array<string>, not string"),
    (["cast(id as string) as body", "map('a', 1) as properties"],
     "column properties must be map<string,string>, not map<string,int>"),
    (["cast(id as string) as body", "id as sharding_key"], "column sharding_key must be string, not bigint"),
])
def test_a_missing_or_mistyped_column_is_named_before_any_row_is_sent(spark, select, error):
    frame = spark.range(3).selectExpr(*select)
    with pytest.raises(Exception, match=error.replace("(", r"\(").replace(")", r"\)")):
        write(frame, nameserver=NOWHERE, topic=TOPIC)


def test_bad_sink_options_are_clear_errors(spark):
    frame = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="no topic: give the option topic or a column topic"):
        write(frame, nameserver=NOWHERE)
    with pytest.raises(Exception, match="unknown graymq sink option"):
        write(frame, nameserver=NOWHERE, topic=TOPIC, batchMaxMesages="5")


def test_a_failed_write_says_what_it_stored_and_its_rerun_under_the_write_id_stores_the_rest_once(cluster, spark):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 0)
    rows = spark.range(0, 200, numPartitions=2)
    broken = rows.selectExpr("case when id = 150 then null else concat('r', id) end as body")  # a bad row
    fixed = rows.selectExpr("concat('r', id) as body")
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "batchMaxMessages": "10", "writeId": "orders-day-1"}
    with pytest.raises(Exception, match=r"partition 1 of batch 0 stopped after 50 of its rows were stored "
                                        r"\(write or query id orders-day-1\): graymq sink: a row has a null body"):
        write(broken, **options)
    first = bodies(stored_rows(spark, cluster.ns_url, TOPIC, gray=False))
    assert 50 <= sum(first.values()) <= 150, "partition 1's first 50 rows, and partition 0's unless it was cancelled"

    write(fixed, **options)  # the same write, fixed: what is stored already is recognised
    write(fixed, **options)  # once more: everything is a replay now
    stored = bodies(stored_rows(spark, cluster.ns_url, TOPIC, gray=False))
    assert stored == {f"r{n}": 1 for n in range(200)}, "every row once"
