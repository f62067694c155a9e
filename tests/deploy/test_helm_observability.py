"""The chart's Grafana dashboard (a ConfigMap for Grafana's sidecar) and its PrometheusRule: rendered only when
their values are on, valid, and naming only metrics that a real broker and a real name server expose.

Rules are checked by ``promtool check rules`` and their alerts exercised by ``promtool test rules`` where promtool
is installed (Debian: the ``prometheus`` package); a schema check and a minimal PromQL parse run everywhere.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from graymq.nameserver_api.client import NameServerClient
from tests.deploy.test_helm_chart import CHART, KUBERNETES_VERSION, NAMESPACE, Release, kn, render, render_strict
from tests.support.cluster import Cluster, module_processes
from tests.support.metrics import Scrape, scrape

ON = {"grafana": {"dashboards": {"enabled": True}}, "prometheus": {"rules": {"enabled": True}}}
DASHBOARD_KEY = "graymq-release.json"
# Series Prometheus makes itself, not any exposition.
PROMETHEUS_SERIES = {"up"}
# Sample names a family of each type exposes (``prometheus_client``, no ``_created``).
SAMPLE_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
                   "summary": ("", "_sum", "_count"), "info": ("_info",), "unknown": ("",)}
# Clauses whose parentheses hold label names, not expressions.
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names,
    label values or ranges. Fails on unbalanced brackets or quotes.

    >>> sorted(metric_names('sum by (side) (rate(a_total{g="$g", o=~"x|y"}[5m])) / on (g) b > 0 or absent(up)'))
    ['a_total', 'b', 'up']
    """
    check_balanced(expr)
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^{}]*\}", " ", bare)
    bare = re.sub(r"\[[^\[\]]*\]", " ", bare)
    bare = _LABEL_LIST.sub(" ", bare)
    names = set()
    for match in _IDENTIFIER.finditer(bare):
        following = bare[match.end():].lstrip()
        if match.group() not in _KEYWORDS and not following.startswith("("):
            names.add(match.group())
    return names


def check_balanced(expr: str) -> None:
    """Raise ValueError when brackets or double quotes do not pair up (outside quoted strings)."""
    pairs, stack, quoted, escaped = {")": "(", "]": "[", "}": "{"}, [], False, False
    for char in expr:
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"':
            quoted = True
        elif char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            raise ValueError(f"unbalanced {char!r} in {expr!r}")
    if stack or quoted:
        raise ValueError(f"unclosed {'quote' if quoted else stack[-1]!r} in {expr!r}")


# --- rendering ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def observed() -> Release:
    return render(ON, "dashboards and rules on")


def dashboard_of(release: Release) -> dict[str, Any]:
    config_map = release.find("ConfigMap", "-dashboards")
    return dict(json.loads(config_map["data"][DASHBOARD_KEY]))


def rule_groups(release: Release) -> list[dict[str, Any]]:
    return list(release.find("PrometheusRule")["spec"]["groups"])


def rules_of(release: Release) -> list[dict[str, Any]]:
    return [rule for group in rule_groups(release) for rule in group["rules"]]


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every panel's PromQL and the series each variable's ``label_values(series, label)`` reads."""
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            label_values = re.fullmatch(r"label_values\((.+),\s*\w+\)", var["query"]["query"])
            assert label_values, var["query"]["query"]
            exprs.append(label_values.group(1))
    return exprs


def grafana_free(expr: str) -> str:
    """The expression as Prometheus would get it from Grafana: its variables replaced by sample values."""
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace("$namespace", "messaging").replace("$group", "G").replace("$lane", "v3"))


@pytest.mark.unit
def test_neither_dashboard_nor_rules_render_by_default() -> None:
    release = render({}, "default values")
    assert release.merged["grafana"]["dashboards"]["enabled"] is False
    assert release.merged["prometheus"]["rules"]["enabled"] is False
    kinds = {o["kind"] for o in release.objects}
    assert "PrometheusRule" not in kinds and "ConfigMap" not in kinds


@pytest.mark.unit
def test_each_renders_alone_when_its_value_is_on() -> None:
    dashboards = render({"grafana": {"dashboards": {"enabled": True}}}, "dashboards only")
    rules = render({"prometheus": {"rules": {"enabled": True}}}, "rules only")
    assert [kn(o) for o in dashboards.objects if o["kind"] in ("ConfigMap", "PrometheusRule")] == [
        "ConfigMap/mq-graymq-dashboards"]
    assert [kn(o) for o in rules.objects if o["kind"] in ("ConfigMap", "PrometheusRule")] == [
        "PrometheusRule/mq-graymq"]


@pytest.mark.unit
def test_chart_with_both_on_lints_strictly_and_references_only_existing_values(observed: Release) -> None:
    report = helm.lint(CHART, ON, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBERNETES_VERSION}")
    assert not report["errors"] and not [m for m in report["messages"] if m["severity"] >= 2], report
    assert render_strict(ON).keys() == observed.manifests.keys()


@pytest.mark.unit
def test_dashboard_config_map_carries_the_sidecar_label_and_is_valid_kubernetes(observed: Release) -> None:
    config_map = observed.find("ConfigMap", "-dashboards")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == NAMESPACE
    kubernetes_validate.validate(config_map, KUBERNETES_VERSION, strict=True)
    moved = render({"grafana": {"dashboards": {"enabled": True, "label": "dashboards.example.com/grafana",
                                               "labelValue": "graymq", "namespace": "monitoring",
                                               "annotations": {"grafana_folder": "graymq"}}}}, "sidecar label")
    metadata = moved.find("ConfigMap", "-dashboards")["metadata"]
    assert metadata["labels"]["dashboards.example.com/grafana"] == "graymq"
    assert "grafana_dashboard" not in metadata["labels"]
    assert (metadata["namespace"], metadata["annotations"]) == ("monitoring", {"grafana_folder": "graymq"})


@pytest.mark.unit
def test_dashboard_has_variables_and_panels_on_the_datasource_variable(observed: Release) -> None:
    dashboard = dashboard_of(observed)
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    variables = {var["name"]: var for var in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert "namespace" in variables["namespace"]["query"]["query"]
    assert variables["group"]["query"]["query"].endswith(", group)")
    assert "$namespace" in variables["group"]["query"]["query"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert 'namespace="$namespace"' in target["expr"], panel["title"]
            check_balanced(target["expr"])
    titles = " ".join(panel["title"].lower() for panel in dashboard["panels"])
    for subject in ("throughput", "failure", "p99", "lag", "gray backlog", "weight", "operations",
                    "brokers", "in sync", "store damage", "fsync", "tls"):
        assert subject in titles, subject


@pytest.mark.unit
def test_dashboard_has_a_lane_variable_and_per_lane_panels_reading_it(observed: Release) -> None:
    dashboard = dashboard_of(observed)
    lane = next(var for var in dashboard["templating"]["list"] if var["name"] == "lane")
    assert lane["query"]["query"].endswith(", lane)") and '$group' in lane["query"]["query"]
    assert lane["multi"] and lane["includeAll"]
    per_lane = {panel["title"]: panel for panel in dashboard["panels"] if panel["title"].endswith("per lane")}
    assert set(per_lane) == {"Failure rate per lane", "Lag per lane", "Throughput per lane", "Stored per lane"}
    for panel in per_lane.values():
        for target in panel["targets"]:
            assert 'lane=~"$lane"' in target["expr"] and "by (lane)" in target["expr"], panel["title"]
            assert target["legendFormat"] == "{{lane}}", panel["title"]


@pytest.mark.unit
def test_rules_have_the_prometheus_rule_shape_and_every_alert(observed: Release) -> None:
    rule = observed.find("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    groups = rule_groups(observed)
    assert groups and len({g["name"] for g in groups}) == len(groups)
    for group in groups:
        assert set(group) == {"name", "rules"} and group["rules"], group["name"]
        for alert in group["rules"]:
            assert set(alert) <= {"alert", "expr", "for", "labels", "annotations"}, alert
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", alert["alert"]), alert["alert"]
            assert "for" not in alert or re.fullmatch(r"([0-9]+(ms|s|m|h|d|w|y))+", alert["for"]), alert
            assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
            assert {"summary", "description"} <= set(alert["annotations"]), alert["alert"]
            assert metric_names(alert["expr"]), alert["alert"]
            assert f'namespace="{NAMESPACE}"' in alert["expr"], alert["alert"]
    assert {a["alert"] for a in rules_of(observed)} == {
        "GraymqGrayBacklogNotDraining", "GraymqSideFailureRate", "GraymqLaneFailureRate", "GraymqLaneBacklog",
        "GraymqReplicaOutOfSync", "GraymqStoreDamage", "GraymqNameServerUnreachable"}
    for alert in ("GraymqLaneFailureRate", "GraymqLaneBacklog"):  # a runbook; its URL only when one is given
        annotations = next(a for a in rules_of(observed) if a["alert"] == alert)["annotations"]
        assert "docs/lanes.md" in annotations["runbook"] and "runbook_url" not in annotations, alert


@pytest.mark.unit
def test_rule_values_set_thresholds_labels_and_durations() -> None:
    release = render({"prometheus": {"rules": {
        "enabled": True, "labels": {"release": "kube-prometheus-stack"}, "alertLabels": {"team": "messaging"},
        "failureRatePercent": 2.5, "grayBacklogFor": "30m", "runbookUrl": "https://wiki.example.com/graymq/lanes",
        "lanes": {"failureRatePercent": 7, "failureRateFor": "3m", "backlogMessages": 500, "backlogFor": "20m"}}}},
        "rule values")
    assert release.find("PrometheusRule")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = {a["alert"]: a for a in rules_of(release)}
    assert all(a["labels"]["team"] == "messaging" for a in alerts.values())
    assert alerts["GraymqSideFailureRate"]["expr"].rstrip().endswith("> 2.5")
    assert alerts["GraymqGrayBacklogNotDraining"]["for"] == "30m"
    assert "[30m]" in alerts["GraymqGrayBacklogNotDraining"]["expr"]
    lane_failures, lane_backlog = alerts["GraymqLaneFailureRate"], alerts["GraymqLaneBacklog"]
    assert lane_failures["expr"].rstrip().endswith("> 7") and lane_failures["for"] == "3m"
    assert lane_backlog["expr"].rstrip().endswith("> 500") and lane_backlog["for"] == "20m"
    for alert in (lane_failures, lane_backlog):
        assert alert["annotations"]["runbook_url"] == (
            "https://wiki.example.com/graymq/lanes#runbook-a-lane-failing-or-lagging")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"prometheus": {"rules": {"grayBacklogFor": "15 minutes"}}}, "/prometheus/rules/grayBacklogFor"),
        ({"prometheus": {"rules": {"failureRatePercent": 0}}}, "/prometheus/rules/failureRatePercent"),
        ({"prometheus": {"rules": {"lanes": {"backlogMessages": -1}}}}, "/prometheus/rules/lanes/backlogMessages"),
        ({"prometheus": {"rules": {"lanes": {"backlogFor": "ten minutes"}}}}, "/prometheus/rules/lanes/backlogFor"),
        ({"prometheus": {"rules": {"runbookUrl": "docs/lanes.md"}}}, "/prometheus/rules/runbookUrl"),
        ({"prometheus": {"rules": {"alertLabels": {"severity": "page"}}}}, "propertyName 'severity'"),
        ({"grafana": {"dashboards": {"label": "not a label"}}}, "/grafana/dashboards/label"),
        ({"grafana": {"dashboards": {"enable": True}}}, "enable"),
    ],
)
def test_observability_values_are_checked_by_the_schema(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmValuesError) as failure:
        render(values, f"bad values {values}")
    assert complaint in str(failure.value)


@pytest.mark.unit
def test_schema_check_catches_a_broken_expression() -> None:
    for broken in ('sum(rate(x_total{a="b"}[5m])', 'x{a="b}', "x]"):
        with pytest.raises(ValueError):
            check_balanced(broken)


PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: apt-get install "
                                    "prometheus); the schema check above still runs")


@pytest.mark.unit
@needs_promtool
def test_promtool_accepts_the_rendered_rules(observed: Release, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups(observed)}))
    checked = subprocess.run([str(PROMTOOL), "check", "rules", str(rules)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --- the metric names are the real ones --------------------------------------------------------------


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scrape, Scrape]]:
    """One scrape of a real name server and of a real replicated broker (so the replica families exist),
    after a group's release state was set: ``(name server, broker)``."""
    root = tmp_path_factory.mktemp("observed")
    with module_processes(root) as start:
        cluster = Cluster(start, f"sqlite:///{root}/ns.db", root)
        cluster.start_nameserver()
        broker = cluster.add_broker("broker-r", "--replica-id", "0", "--replication", "sync",
                                    GRAYMQ_BROKER_METRICS_PORT="0")
        cluster.ns_call(release_state)
        assert broker.ready_info is not None
        yield scrape(f"{cluster.ns_url}/metrics"), scrape(f"http://{broker.ready_info['metrics']}/metrics")


async def release_state(ns: NameServerClient) -> None:
    """Group GR: gray switch on, weight 25, a rollout running; group GP: a promote that failed."""
    for group in ("GR", "GP"):
        await ns.client_heartbeat({"group": group, "client_id": f"{group}-c1", "role": "consumer"})
    await ns.set_switch("GR", True)
    await ns.set_weight("GR", 25, reason="canary step")
    await ns.start_cutover("GR", "rollout", "hold", [])
    promote = await ns.start_cutover("GP", "promote", "drain", [])
    await ns.update_cutover(promote.id, state="FAILED")


def sample_names(metrics: Scrape) -> set[str]:
    """Every sample name the exposition has or would have (a family without samples yet included)."""
    names = {name for name, _ in metrics.samples}
    for family, kind in metrics.types.items():
        names |= {family + suffix for suffix in SAMPLE_SUFFIXES[kind]}
    return names


@pytest.mark.integration
def test_name_server_exposes_each_groups_switch_weight_and_operations(exposed: tuple[Scrape, Scrape]) -> None:
    nameserver, _ = exposed
    assert nameserver.value("graymq_group_gray_switch", group="GR") == 1
    assert nameserver.value("graymq_group_gray_weight_percent", group="GR") == 25
    assert nameserver.value("graymq_group_gray_weight_percent", group="GP") == 0
    assert nameserver.value("graymq_group_operations_running", group="GR", kind="rollout") == 1
    assert nameserver.value("graymq_group_operations_running", group="GR", kind="promote") == 0
    assert nameserver.value("graymq_group_operations_running", group="GP", kind="promote") == 0
    assert nameserver.value("graymq_group_operations_finished_total", group="GP", kind="promote",
                            state="FAILED") == 1
    assert nameserver.value("graymq_group_operations_finished_total", group="GR", kind="rollout",
                            state="SUCCEEDED") == 0
    assert nameserver.types["graymq_group_operations_finished"] == "counter"


@pytest.mark.integration
def test_every_metric_the_dashboard_and_rules_name_is_exposed(observed: Release,
                                                              exposed: tuple[Scrape, Scrape]) -> None:
    available = PROMETHEUS_SERIES | sample_names(exposed[0]) | sample_names(exposed[1])
    named = {name: f"dashboard: {expr}" for expr in dashboard_exprs(dashboard_of(observed))
             for name in metric_names(grafana_free(expr))}
    named |= {name: f"alert {rule['alert']}" for rule in rules_of(observed) for name in metric_names(rule["expr"])}
    missing = {name: where for name, where in named.items() if name not in available}
    assert not missing, missing
    for family in ("graymq_consumer_messages_total", "graymq_broker_consumer_backlog",
                   "graymq_broker_replica_out_of_sync", "graymq_store_damaged_records_total"):
        assert family in named, family  # the check above saw the families that matter


NS_POD = f'namespace="{NAMESPACE}", pod="mq-graymq-nameserver-5d9c-x1"'
BROKER_POD = f'namespace="{NAMESPACE}", pod="mq-graymq-broker-0-1"'


def consumer_series(group: str, side: str, lane: str, failed_per_min: int, consumed_per_min: int
                    ) -> list[dict[str, str]]:
    """A name server's counters of one group's lane, as both name server replicas report them."""
    return [
        {"series": f'graymq_consumer_messages_total{{namespace="{NAMESPACE}", pod="mq-graymq-nameserver-5d9c-{pod}",'
                   f' instance="{pod}", group="{group}", side="{side}", lane="{lane}", outcome="{outcome}"}}',
         "values": f"0+{per_min}x30"}
        for pod in ("x1", "x2") for outcome, per_min in (("failed", failed_per_min), ("consumed", consumed_per_min))
    ]


# 30 minutes of one cluster: a broker set of two replicas, where group GR's gray backlog is stuck at 40 and
# GD's drains to 0, GL's lane v3 drains too slowly (above 10000 throughout) beside a free slot's big backlog, and a
# replica is out of sync from minute 5; GR's gray side failing 10 % of deliveries (its lane v3 20 %, its gray lane
# none), its normal side 1 %; damage found at minute 10; a name server down from minute 5 while the other reports.
def replica_series(pod: str, leader: int) -> list[dict[str, str]]:
    """One replica of a broker set: followers copy the leader's offsets and know its in-sync set."""
    where = f'namespace="{NAMESPACE}", pod="{pod}"'
    queue = 'topic="T", queue="0", gray="true", lane="gray", side="gray"'
    lane_queue, free_slot = (f'topic="T", queue="{q}", gray="true", lane="{lane}", side="gray"'
                             for q, lane in (("8", "v3"), ("6", "")))
    return [
        {"series": f"graymq_broker_replica_leader{{{where}}}", "values": f"{leader}x30"},
        {"series": f'graymq_broker_consumer_backlog{{{where}, group="GR", {queue}}}', "values": "40x30"},
        {"series": f'graymq_broker_consumer_backlog{{{where}, group="GD", {queue}}}', "values": "100-5x20 0x10"},
        {"series": f'graymq_broker_consumer_backlog{{{where}, group="GL", {lane_queue}}}', "values": "30000-100x30"},
        {"series": f'graymq_broker_consumer_backlog{{{where}, group="GL", {free_slot}}}', "values": "90000-100x30"},
        {"series": f"graymq_broker_replica_out_of_sync{{{where}}}", "values": "0x5 1x25"},
    ]


ALERT_SERIES = [
    *replica_series("mq-graymq-broker-0-1", leader=1),
    *replica_series("mq-graymq-broker-0-0", leader=0),
    *consumer_series("GR", "gray", "v3", 20, 80),
    *consumer_series("GR", "gray", "gray", 0, 100),
    *consumer_series("GR", "normal", "base", 1, 99),
    {"series": f"graymq_store_damaged_records_total{{{BROKER_POD}}}", "values": "0x10 2x20"},
    {"series": f"graymq_store_bad_units_total{{{BROKER_POD}}}", "values": "0x30"},
    {"series": f"up{{{NS_POD}}}", "values": "1x5 0x25"},
    {"series": f'graymq_nameserver_live_brokers{{namespace="{NAMESPACE}", pod="mq-graymq-nameserver-5d9c-x2"}}',
     "values": "2x30"},
]


def expand(template: str, labels: dict[str, str], value: float) -> str:
    """An annotation as Prometheus expands it, for the few template forms the rules use."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)
    text = text.replace('{{ $value | printf "%.1f" }}', f"{value:.1f}")
    return text.replace("{{ $value }}", f"{value:g}")


@pytest.mark.unit
@needs_promtool
def test_alerts_fire_on_the_failures_they_name_and_only_on_them(observed: Release, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups(observed)}))
    annotations = {rule["alert"]: rule["annotations"] for rule in rules_of(observed)}

    def firing(alert: str, at: str, labels: dict[str, str] | None = None, value: float = 0,
               summary: str = "") -> dict[str, Any]:
        """``alert`` fires at ``at`` once, with ``labels`` and ``summary`` (its other annotations expanded); none
        fires without labels."""
        expected = [] if labels is None else [{"exp_labels": labels, "exp_annotations": {
            **{name: expand(text, labels, value) for name, text in annotations[alert].items()},
            "summary": summary}}]
        return {"eval_time": at, "alertname": alert, "exp_alerts": expected}

    broker = {"namespace": NAMESPACE, "pod": "mq-graymq-broker-0-1"}
    nameserver = {"namespace": NAMESPACE, "pod": "mq-graymq-nameserver-5d9c-x1", "severity": "critical"}
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": ALERT_SERIES,
            "alert_rule_test": [
                firing("GraymqGrayBacklogNotDraining", "10m"),  # not yet for 15m; GD drains, never
                firing("GraymqGrayBacklogNotDraining", "25m",
                       {"namespace": NAMESPACE, "group": "GR", "severity": "warning"}, 40,
                       "Gray backlog of group GR is not draining"),
                firing("GraymqSideFailureRate", "15m",  # the normal side's 1 % does not fire
                       {"namespace": NAMESPACE, "group": "GR", "side": "gray", "severity": "warning"}, 10,
                       "The gray side of group GR fails 10.0% of deliveries"),
                firing("GraymqLaneFailureRate", "4m"),  # not yet for 5m
                firing("GraymqLaneFailureRate", "15m",  # lane v3 alone: its gray lane and base do not fire
                       {"namespace": NAMESPACE, "group": "GR", "lane": "v3", "severity": "warning"}, 20,
                       "Lane v3 of group GR fails 20.0% of deliveries"),
                firing("GraymqLaneBacklog", "9m"),  # not yet for 10m
                firing("GraymqLaneBacklog", "15m",  # GL's v3, counted once (the leader); not the free slot's
                       {"namespace": NAMESPACE, "group": "GL", "lane": "v3", "severity": "warning"}, 28500,
                       "Lane v3 of group GL lags 28500 messages"),
                firing("GraymqReplicaOutOfSync", "4m"),
                firing("GraymqReplicaOutOfSync", "15m", {**broker, "severity": "warning"}, 1,
                       "1 replica(s) of the broker set led by mq-graymq-broker-0-1 out of sync"),
                firing("GraymqStoreDamage", "5m"),
                firing("GraymqStoreDamage", "15m", {**broker, "severity": "critical"}, 2,
                       "Broker mq-graymq-broker-0-1 found damaged records in its store"),
                firing("GraymqNameServerUnreachable", "4m"),
                firing("GraymqNameServerUnreachable", "15m", nameserver, 0,
                       "A graymq name server cannot be scraped, or none reads its database"),
            ],
        }, {  # the name servers answer scrapes but none reports the cluster (its database unreachable)
            "interval": "1m",
            "input_series": [{"series": f"up{{{NS_POD}}}", "values": "1x10"}],
            "alert_rule_test": [
                firing("GraymqNameServerUnreachable", "1m"),
                firing("GraymqNameServerUnreachable", "5m", {"namespace": NAMESPACE, "severity": "critical"}, 1,
                       "A graymq name server cannot be scraped, or none reads its database"),
            ],
        }],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    tested = subprocess.run([str(PROMTOOL), "test", "rules", "tests.yaml"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
