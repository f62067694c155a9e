"""The name server's metrics as Prometheus text: parsed back, so malformed exposition fails."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from graymq.nameserver.metrics import Metrics

pytestmark = pytest.mark.unit


def parse(text: str) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    """family name → (type, {sorted labels: value}) of every ``graymq_`` family."""
    return {
        family.name: (family.type, {tuple(sorted(s.labels.items())): s.value for s in family.samples})
        for family in text_string_to_metric_families(text)
        if family.name.startswith("graymq_")
    }


def test_request_counters_and_gauges_render_in_the_text_format() -> None:
    metrics = Metrics()
    metrics.request("GET", "/v1/groups/{group}/clients", 200)
    metrics.request("GET", "/v1/groups/{group}/clients", 200)
    metrics.request("PUT", "/v1/topics/{topic}", 401)
    metrics.db_error()
    metrics.watching(+1)
    metrics.watching(+1)
    metrics.watching(-1)
    metrics.beats(full=2, alive=0, alive_ids=5)
    text = metrics.render(3, [("g1", "consumer", True, None, 2), ("g1", "consumer", True, "v3", 1),
                              ("g1", "producer", False, None, 1)])
    assert parse(text) == {
        "graymq_nameserver_http_requests": ("counter", {
            (("method", "GET"), ("route", "/v1/groups/{group}/clients"), ("status", "200")): 2,
            (("method", "PUT"), ("route", "/v1/topics/{topic}"), ("status", "401")): 1,
        }),
        "graymq_nameserver_db_errors": ("counter", {(): 1}),
        "graymq_nameserver_open_watches": ("gauge", {(): 1}),
        "graymq_nameserver_client_beats": ("counter", {(("kind", "full"),): 2, (("kind", "alive_id"),): 5}),
        "graymq_nameserver_live_brokers": ("gauge", {(): 3}),
        "graymq_nameserver_live_clients": ("gauge", {
            (("gray", "true"), ("group", "g1"), ("lane", "gray"), ("role", "consumer")): 2,
            (("gray", "true"), ("group", "g1"), ("lane", "v3"), ("role", "consumer")): 1,
            (("gray", "false"), ("group", "g1"), ("lane", "base"), ("role", "producer")): 1,
        }),
    }
    assert "# TYPE graymq_nameserver_http_requests_total counter" in text.splitlines()
    assert text.endswith("\n")


def test_gauges_are_left_out_when_the_database_could_not_be_read() -> None:
    families = parse(Metrics().render(None, None))
    assert "graymq_nameserver_live_brokers" not in families and "graymq_nameserver_live_clients" not in families
    assert families["graymq_nameserver_db_errors"] == ("counter", {(): 0})


def test_label_values_are_escaped() -> None:
    metrics = Metrics()
    route = 'a"b\\c\nd'
    metrics.request("GET", route, 200)
    text = metrics.render(None, None)
    assert 'route="a\\"b\\\\c\\nd"' in text
    (labels,) = parse(text)["graymq_nameserver_http_requests"][1]
    assert dict(labels)["route"] == route


def test_two_apps_in_one_process_keep_separate_counters() -> None:
    first, second = Metrics(), Metrics()
    first.db_error()
    assert parse(first.render(None, None))["graymq_nameserver_db_errors"][1] == {(): 1}
    assert parse(second.render(None, None))["graymq_nameserver_db_errors"][1] == {(): 0}


def test_consumer_health_is_labelled_by_side_and_lane() -> None:
    figures = {"consumed": 9, "failed": 1, "sent_back": 1, "dead_lettered": 0, "p50_ms": 1.0, "p99_ms": 4.0}
    text = Metrics().render(None, None, {"g1": {"base": figures, "gray": figures, "v3": figures}})
    messages = parse(text)["graymq_consumer_messages"][1]
    failed = {dict(labels)["lane"]: (dict(labels)["side"], value) for labels, value in messages.items()
              if dict(labels)["outcome"] == "failed"}
    assert failed == {"base": ("normal", 1), "gray": ("gray", 1), "v3": ("gray", 1)}
    latency = parse(text)["graymq_consumer_latency_ms"][1]
    assert latency[(("group", "g1"), ("lane", "v3"), ("quantile", "0.99"), ("side", "gray"))] == 4.0
