"""Prometheus text rendering."""

from __future__ import annotations

import pytest

from graymq.nameserver.metrics import Metrics, escape_label

pytestmark = pytest.mark.unit


def test_request_counters_and_gauges_render_in_the_text_format() -> None:
    metrics = Metrics()
    metrics.request("GET", "/v1/groups/{group}/clients", 200)
    metrics.request("GET", "/v1/groups/{group}/clients", 200)
    metrics.request("PUT", "/v1/topics/{topic}", 401)
    metrics.db_error()
    text = metrics.render(3, [("g1", "consumer", True, 2), ("g1", "producer", False, 1)])
    lines = text.splitlines()
    clients_route = 'route="/v1/groups/{group}/clients"'
    assert f'graymq_nameserver_http_requests_total{{method="GET",{clients_route},status="200"}} 2' in lines
    assert (
        'graymq_nameserver_http_requests_total{method="PUT",route="/v1/topics/{topic}",status="401"} 1'
        in lines
    )
    assert "graymq_nameserver_db_errors_total 1" in lines
    assert "graymq_nameserver_live_brokers 3" in lines
    assert 'graymq_nameserver_live_clients{group="g1",role="consumer",gray="true"} 2' in lines
    assert "# TYPE graymq_nameserver_live_clients gauge" in lines
    assert text.endswith("\n")


def test_gauges_are_left_out_when_the_database_could_not_be_read() -> None:
    text = Metrics().render(None, None)
    assert "live_brokers" not in text and "live_clients" not in text
    assert "graymq_nameserver_db_errors_total 0" in text


def test_label_values_are_escaped() -> None:
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
