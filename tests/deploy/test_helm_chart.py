"""The Helm chart renders, lints strictly and yields valid Kubernetes 1.30 objects — offline.

Rendering and linting go through helm-python-sdk (Helm's Go SDK behind a C ABI, no helm binary):
``helm.Chart.load(path).render(values, name=, namespace=)`` runs the real template engine and the
chart's values.schema.json; ``helm.lint(path, values, strict=True, kube_version=...)`` is
``helm lint --strict``. Every rendered object is checked against the Kubernetes 1.30 OpenAPI
schemas shipped inside kubernetes-validate, in strict mode (unknown fields are errors).
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "graymq"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
KUBERNETES_VERSION = "1.30.0"
RELEASE = "mq"
NAMESPACE = "messaging"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")
# Set by Kubernetes >= 1.28 on a StatefulSet's pods: the pod's ordinal, a broker set replica's id.
POD_INDEX_FIELD = "metadata.labels['apps.kubernetes.io/pod-index']"
# Variables on graymq containers that are not settings, only expanded into settings: the downward-API
# pod name (GRAYMQ_BROKER_NAME / GRAYMQ_BROKER_ADVERTISED_ADDRESS) and the token of a user's broker
# token Secret (GRAYMQ_BROKER_TOKENS).
NON_SETTINGS_ENV = {"POD_NAME", "BROKER_TOKEN"}
# Source packages whose direct environment reads count as "the code reads this variable".
SOURCE_PACKAGES = ("nameserver", "broker_ext", "client", "gray_controller", "protocol", "migrations")
_ENV_READ = re.compile(
    r"""os\.environ\.get\(\s*["'](GRAYMQ_\w+)["']"""
    r"""|os\.getenv\(\s*["'](GRAYMQ_\w+)["']"""
    r"""|os\.environ\[\s*["'](GRAYMQ_\w+)["']\s*\](?!\s*=[^=])"""
)


@dataclass
class Release:
    """One offline render of the chart: merged values, raw templates and the parsed objects."""

    label: str
    values: dict[str, Any]  # what the user passed
    merged: dict[str, Any]  # chart defaults + user values, as an install would use them
    manifests: dict[str, str]  # template path -> rendered text
    objects: list[dict[str, Any]]
    app_version: str

    def find(self, kind: str, name_suffix: str = "") -> dict[str, Any]:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, f"{self.label}: expected one {kind} *{name_suffix}, got {[kn(o) for o in found]}"
        return found[0]

    def workloads(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] in WORKLOAD_KINDS]

    def brokers(self) -> list[dict[str, Any]]:
        """The broker StatefulSets: one of single-copy brokers, or one per broker set."""
        found = [o for o in self.objects if o["kind"] == "StatefulSet" and component(o) == "broker"]
        assert found, f"{self.label}: no broker StatefulSet"
        return found

    @property
    def broker_pod(self) -> str:
        """The first pod of the first broker StatefulSet."""
        return f"{self.brokers()[0]['metadata']['name']}-0"

    @property
    def graymq_image(self) -> str:
        image = self.merged["image"]
        return f"{image['repository']}:{image['tag'] or self.app_version}"


def kn(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def component(obj: dict[str, Any]) -> str:
    return obj["metadata"]["labels"].get("app.kubernetes.io/component", "")


def render(values: dict[str, Any], label: str) -> Release:
    """Render like ``helm install --dry-run`` would, offline; raises helm.HelmError on any failure."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        merged = chart.merge_values(values)
        app_version = chart.metadata["appVersion"]
    objects: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Release(label, values, merged, manifests, objects, app_version)


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def rendered_secrets(release: Release) -> dict[str, dict[str, str]]:
    """Secret name -> key -> decoded value, for every Secret the chart renders."""
    return {
        o["metadata"]["name"]: {key: base64.b64decode(value).decode() for key, value in o.get("data", {}).items()}
        for o in release.objects
        if o["kind"] == "Secret"
    }


def kubelet_env(container: dict[str, Any], secrets: dict[str, dict[str, str]], pod_name: str) -> dict[str, str]:
    """The environment the kubelet gives ``container``: Secret keys, the pod name and its StatefulSet ordinal
    (the pod-index label: the name's last part) resolved, then each ``$(VAR)`` replaced by a variable defined
    earlier (an unknown reference stays as written)."""
    fields = {"metadata.name": pod_name, POD_INDEX_FIELD: pod_name.rpartition("-")[2]}
    env: dict[str, str] = {}
    for entry in container.get("env", []):
        source = entry.get("valueFrom")
        if source is None:
            env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[entry["name"]] = secrets[ref["name"]][ref["key"]]
        else:
            env[entry["name"]] = fields[source["fieldRef"]["fieldPath"]]
    return env


def production_values() -> dict[str, Any]:
    return helm.values_from_yaml(PRODUCTION_VALUES.read_text())


@pytest.fixture(scope="module")
def default_release() -> Release:
    return render({}, "default values")


@pytest.fixture(scope="module")
def production_release() -> Release:
    return render(production_values(), "production values")


TLS_VALUES = {"tls": {"enabled": True, "existingSecret": "mq-tls", "caCert": True}}


@pytest.fixture(scope="module")
def tls_release() -> Release:
    return render(TLS_VALUES, "TLS values")


@pytest.fixture(params=["default", "production", "tls"])
def release(request: pytest.FixtureRequest) -> Release:
    return request.getfixturevalue(f"{request.param}_release")


def nameserver_scheme(release: Release) -> str:
    return "https" if release.merged["tls"]["enabled"] else "http"


def declared_settings_env() -> set[str]:
    """Every GRAYMQ_* name a settings class declares (env prefix + field name) or the code reads directly."""
    from graymq.broker_ext.config import BrokerSettings
    from graymq.nameserver.settings import DatabaseSettings, NameServerSettings

    names: set[str] = set()
    for cls in (DatabaseSettings, NameServerSettings, BrokerSettings):
        prefix = cls.model_config.get("env_prefix", "")
        for field_name, field in cls.model_fields.items():
            if isinstance(field.validation_alias, str):  # a variable shared by both servers (GRAYMQ_DEV_MODE)
                names.add(field.validation_alias.upper())
                continue
            assert field.alias is None and field.validation_alias is None, (
                f"{cls.__name__}.{field_name} has an alias: teach this test how pydantic-settings names it"
            )
            names.add(f"{prefix}{field_name}".upper())
    return names | read_directly_env()


def read_directly_env() -> set[str]:
    """GRAYMQ_* names the code reads with os.environ / os.getenv (the CLI's GRAYMQ_NAMESERVER, ...)."""
    names: set[str] = set()
    for package in SOURCE_PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            for match in _ENV_READ.finditer(source.read_text(encoding="utf-8")):
                names.add(next(group for group in match.groups() if group))
    return names


# --- the chart renders, lints and validates -------------------------------------------------------


def test_chart_lints_without_warnings_in_strict_mode(release: Release) -> None:
    report = helm.lint(
        CHART, release.values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBERNETES_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
    assert report["total_charts_linted"] == 1
    assert not report["errors"] and not problems, f"{release.label}: {report}"


def render_native(values: dict[str, Any], **options: Any) -> dict[str, str]:
    """Render with libhelm_c's ``helm_render`` options that ``Chart.render`` (0.2.x) does not pass through
    (``strict``, ``kube_version``), calling the binding the wrapper itself uses."""
    from helm_python import _native

    options = {"name": RELEASE, "namespace": NAMESPACE, "is_install": True, **options}
    with helm.Chart.load(CHART) as chart:
        return json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options)))


def render_strict(values: dict[str, Any]) -> dict[str, str]:
    """Render with Go templates' ``missingkey=error``: a reference to a value that does not exist fails.

    ``helm lint --strict`` does not catch such references (Helm renders them as empty strings), which is
    why this test exists.
    """
    return render_native(values, strict=True)


def test_templates_reference_only_values_that_exist(release: Release) -> None:
    assert render_strict(release.values).keys() == release.manifests.keys()


def test_every_rendered_object_is_valid_for_kubernetes_1_30(release: Release) -> None:
    failures = []
    for obj in release.objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{kn(obj)}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            failures.append(f"{kn(obj)}: {exc.message}")
    assert not failures, f"{release.label}:\n" + "\n".join(failures)


def test_default_install_has_nameservers_brokers_migrations_and_dev_postgres(default_release: Release) -> None:
    kinds = sorted(kn(o) for o in default_release.objects)
    assert kinds == sorted([
        "Deployment/mq-graymq-nameserver", "Service/mq-graymq-nameserver",
        "PodDisruptionBudget/mq-graymq-nameserver",
        "StatefulSet/mq-graymq-broker", "Service/mq-graymq-broker-headless", "PodDisruptionBudget/mq-graymq-broker",
        "Job/mq-graymq-migrate", "Secret/mq-graymq-admin-tokens", "Secret/mq-graymq-broker-token",
        "Secret/mq-graymq-postgresql", "Service/mq-graymq-postgresql", "StatefulSet/mq-graymq-postgresql",
    ])
    assert default_release.find("Deployment")["spec"]["replicas"] == 2


def test_production_install_uses_the_external_database_secret_and_no_postgres(production_release: Release) -> None:
    assert not [o for o in production_release.objects if "postgresql" in o["metadata"]["name"]]
    # Admin tokens come from the operator's Secret too: the chart creates no Secret at all.
    assert not [o for o in production_release.objects if o["kind"] == "Secret"]
    for workload in (production_release.find("Deployment"), production_release.find("Job")):
        db_url = env_of(pod_spec(workload)["containers"][0])["GRAYMQ_DB_URL"]
        assert db_url["valueFrom"]["secretKeyRef"] == {"name": "graymq-db", "key": "db-url"}
    nameserver = env_of(pod_spec(production_release.find("Deployment"))["containers"][0])
    assert nameserver["GRAYMQ_ADMIN_TOKENS"]["valueFrom"]["secretKeyRef"] == {
        "name": "graymq-admin-tokens", "key": "admin-tokens",
    }
    broker_token = {"name": "graymq-broker-token", "key": "broker-token"}
    assert nameserver["BROKER_TOKEN"]["valueFrom"]["secretKeyRef"] == broker_token
    for brokers in production_release.brokers():
        broker = env_of(pod_spec(brokers)["containers"][0])
        assert broker["GRAYMQ_BROKER_TOKEN"]["valueFrom"]["secretKeyRef"] == broker_token, kn(brokers)


# --- settings reach the processes only through variables the code reads ----------------------------


def test_graymq_containers_set_only_env_vars_the_settings_declare(release: Release) -> None:
    declared = declared_settings_env()
    unknown = []
    for workload in release.workloads():
        for container in containers(workload):
            names = set(env_of(container))
            graymq_names = {n for n in names if n.startswith("GRAYMQ_")}
            unknown += [f"{kn(workload)}/{container['name']}: {n}" for n in sorted(graymq_names - declared)]
            if container["image"] == release.graymq_image:
                assert "envFrom" not in container, f"{kn(workload)}: envFrom would bypass this check"
                unknown += [
                    f"{kn(workload)}/{container['name']}: {n} (not a GRAYMQ_ setting)"
                    for n in sorted(names - graymq_names - NON_SETTINGS_ENV)
                ]
    assert not unknown, f"{release.label}: env vars no settings class declares:\n" + "\n".join(unknown)


def test_the_settings_scan_sees_the_cli_level_variables() -> None:
    # The CLI reads these with os.environ; if the scan stopped finding them the test above would
    # reject GRAYMQ_NAMESERVER for the wrong reason (or a rename would go unnoticed).
    assert {"GRAYMQ_NAMESERVER", "GRAYMQ_ADMIN_TOKEN"} <= read_directly_env()
    assert {
        "GRAYMQ_DB_URL", "GRAYMQ_ADMIN_TOKENS", "GRAYMQ_BROKER_TOKENS", "GRAYMQ_BROKER_ADVERTISED_ADDRESS",
        "GRAYMQ_BROKER_TOKEN", "GRAYMQ_DEV_MODE",
    } <= declared_settings_env()


def test_env_entries_have_values_and_reference_variables_defined_earlier(release: Release) -> None:
    for workload in release.workloads():
        for container in containers(workload):
            defined: set[str] = set()
            for entry in container.get("env", []):
                where = f"{kn(workload)}/{container['name']}: {entry['name']}"
                assert isinstance(entry.get("value"), str) or "valueFrom" in entry, f"{where} has no value"
                for ref in re.findall(r"\$\((\w+)\)", entry.get("value") or ""):
                    assert ref in defined, f"{where} uses $({ref}) before it is defined"
                defined.add(entry["name"])


def test_no_pod_gets_kubernetes_service_link_variables(release: Release) -> None:
    # A Service named "graymq" would otherwise inject GRAYMQ_PORT=tcp://... into the name server.
    for workload in release.workloads():
        assert pod_spec(workload)["enableServiceLinks"] is False, kn(workload)


# --- migrations hook ---------------------------------------------------------------------------------


def _hook(obj: dict[str, Any]) -> tuple[set[str], int, set[str]]:
    annotations = obj["metadata"].get("annotations", {})
    events = {e.strip() for e in annotations.get("helm.sh/hook", "").split(",") if e.strip()}
    policy = {p.strip() for p in annotations.get("helm.sh/hook-delete-policy", "").split(",") if p.strip()}
    return events, int(annotations.get("helm.sh/hook-weight", "0")), policy


def test_migrations_job_is_a_pre_install_and_pre_upgrade_hook(release: Release) -> None:
    job = release.find("Job", "-migrate")
    events, _, policy = _hook(job)
    assert events == {"pre-install", "pre-upgrade"}
    assert {"before-hook-creation", "hook-succeeded"} <= policy
    migrate = pod_spec(job)["containers"][0]
    assert migrate["image"] == release.graymq_image
    assert migrate["args"] == ["nameserver", "migrate"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == release.merged["migrations"]["backoffLimit"] > 0
    # It migrates exactly the database the name servers use.
    nameserver = pod_spec(release.find("Deployment"))["containers"][0]
    assert env_of(migrate)["GRAYMQ_DB_URL"] == env_of(nameserver)["GRAYMQ_DB_URL"]
    assert env_of(nameserver)["GRAYMQ_AUTO_MIGRATE"]["value"] == "false"


def test_bundled_postgres_exists_before_the_migrations_job_runs(default_release: Release) -> None:
    _, job_weight, _ = _hook(default_release.find("Job", "-migrate"))
    for kind in ("Secret", "Service", "StatefulSet"):
        events, weight, _ = _hook(default_release.find(kind, "-postgresql"))
        assert events == {"pre-install"}, f"{kind}: the dev database must exist at pre-install time"
        assert weight < job_weight, f"{kind} is created after the migrations Job"
    init = pod_spec(default_release.find("Job", "-migrate"))["initContainers"]
    assert [c["name"] for c in init] == ["wait-for-database"]
    assert "pg_isready" in init[0]["command"][-1]
    assert env_of(init[0])["DB_HOST"]["value"] == "mq-graymq-postgresql.messaging.svc.cluster.local"


def test_the_database_url_the_chart_builds_is_one_the_nameserver_accepts(default_release: Release) -> None:
    from graymq.nameserver.settings import DatabaseSettings

    secret = default_release.find("Secret", "-postgresql")
    url = base64.b64decode(secret["data"]["db-url"]).decode()
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert url == f"postgresql+psycopg://graymq:{password}@mq-graymq-postgresql.messaging.svc.cluster.local:5432/graymq"
    assert DatabaseSettings(db_url=url).db_url == url


def test_production_migrations_retry_instead_of_waiting_for_a_bundled_database(production_release: Release) -> None:
    job = production_release.find("Job", "-migrate")
    assert "initContainers" not in pod_spec(job)
    assert job["spec"]["backoffLimit"] == 10


# --- brokers -----------------------------------------------------------------------------------------


def test_single_copy_broker_replicas_follow_values(default_release: Release, tls_release: Release) -> None:
    for release in (default_release, tls_release):
        [brokers] = release.brokers()
        assert brokers["metadata"]["name"] == "mq-graymq-broker"
        assert brokers["spec"]["replicas"] == release.merged["broker"]["replicaCount"] == 2


def test_broker_replicas_override_renders_that_many() -> None:
    [brokers] = render({"broker": {"replicaCount": 5}}, "5 brokers").brokers()
    assert brokers["spec"]["replicas"] == 5


def test_brokers_advertise_stable_dns_names_and_register_with_the_nameserver_service(release: Release) -> None:
    headless = release.find("Service", "-broker-headless")
    assert headless["spec"]["clusterIP"] == "None"
    port = release.merged["broker"]["port"]
    service = release.find("Service", "-nameserver")
    for brokers in release.brokers():
        assert brokers["spec"]["serviceName"] == headless["metadata"]["name"], kn(brokers)
        # The headless Service publishes every broker pod, of every set.
        pod_labels = brokers["spec"]["template"]["metadata"]["labels"]
        assert headless["spec"]["selector"].items() <= pod_labels.items(), kn(brokers)
        env = env_of(pod_spec(brokers)["containers"][0])
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env["GRAYMQ_BROKER_ADVERTISED_ADDRESS"]["value"] == (
            f"$(POD_NAME).{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{port}"
        )
        assert env["GRAYMQ_BROKER_HOST"]["value"] == "0.0.0.0"
        assert env["GRAYMQ_BROKER_NAMESERVER"]["value"] == (
            f"{nameserver_scheme(release)}://{service['metadata']['name']}.{NAMESPACE}.svc.cluster.local:"
            f"{service['spec']['ports'][0]['port']}"
        )
        assert env["GRAYMQ_BROKER_FLUSH"]["value"] == release.merged["broker"]["flush"]


@pytest.mark.parametrize("name", ["default", "tls"])
def test_single_copy_brokers_are_named_after_their_pods_and_do_not_replicate(
    name: str, request: pytest.FixtureRequest
) -> None:
    release: Release = request.getfixturevalue(f"{name}_release")
    [brokers] = release.brokers()
    env = env_of(pod_spec(brokers)["containers"][0])
    assert env["GRAYMQ_BROKER_NAME"]["value"] == "$(POD_NAME)"
    assert not {n for n in env if "REPLICA" in n}
    assert "GRAYMQ_REPLICA_LEASE_SECONDS" not in env_of(pod_spec(release.find("Deployment"))["containers"][0])
    assert "graymq.io/broker-set" not in brokers["spec"]["selector"]["matchLabels"]


def test_each_broker_keeps_its_store_on_its_own_volume(release: Release) -> None:
    for brokers in release.brokers():
        claim = brokers["spec"]["volumeClaimTemplates"][0]
        assert claim["spec"]["resources"]["requests"]["storage"] == release.merged["broker"]["persistence"]["size"]
        container = pod_spec(brokers)["containers"][0]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts[claim["metadata"]["name"]] == env_of(container)["GRAYMQ_BROKER_STORE_DIR"]["value"]


def test_production_brokers_flush_synchronously_with_bigger_pods(production_release: Release) -> None:
    for brokers in production_release.brokers():
        container = pod_spec(brokers)["containers"][0]
        assert env_of(container)["GRAYMQ_BROKER_FLUSH"]["value"] == "sync"
        # One segment size for every replica of a set, as replication requires.
        assert env_of(container)["GRAYMQ_BROKER_SEGMENT_SIZE"]["value"] == "1073741824"
        assert container["resources"]["requests"]["memory"] == "4Gi"
    assert production_release.find("Deployment")["spec"]["replicas"] == 3


# --- broker sets (replication) -------------------------------------------------------------------------

SET_LABEL = "graymq.io/broker-set"


def test_production_runs_two_broker_sets_of_two_sync_replicas(production_release: Release) -> None:
    brokers = production_release.brokers()
    assert [b["metadata"]["name"] for b in brokers] == ["mq-graymq-broker-0", "mq-graymq-broker-1"]
    for sts in brokers:
        name = sts["metadata"]["name"]
        assert sts["spec"]["replicas"] == 2, name
        # Each StatefulSet selects its own set's pods only, and its pods carry that label.
        assert sts["spec"]["selector"]["matchLabels"][SET_LABEL] == name
        assert sts["spec"]["template"]["metadata"]["labels"][SET_LABEL] == name
        env = env_of(pod_spec(sts)["containers"][0])
        assert env["GRAYMQ_BROKER_NAME"]["value"] == name
        assert env["GRAYMQ_BROKER_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == POD_INDEX_FIELD
        assert env["GRAYMQ_BROKER_REPLICATION"]["value"] == "sync"
    nameserver = env_of(pod_spec(production_release.find("Deployment"))["containers"][0])
    assert nameserver["GRAYMQ_REPLICA_LEASE_SECONDS"]["value"] == "4"


def test_the_pods_of_a_set_are_replicas_of_one_broker_numbered_by_ordinal(
    production_release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graymq.broker_ext.config import BrokerSettings

    secrets = {**USER_SECRETS, **rendered_secrets(production_release)}
    headless = production_release.find("Service", "-broker-headless")["metadata"]["name"]
    seen = []
    for sts in production_release.brokers():
        set_name = sts["metadata"]["name"]
        container = pod_spec(sts)["containers"][0]
        for ordinal in range(sts["spec"]["replicas"]):
            pod = f"{set_name}-{ordinal}"
            settings = load_settings(BrokerSettings, kubelet_env(container, secrets, pod), monkeypatch)
            assert (settings.name, settings.replica_id, settings.replication) == (set_name, ordinal, "sync")
            assert settings.advertised_address == f"{pod}.{headless}.{NAMESPACE}.svc.cluster.local:10911"
            assert (settings.replication_timeout_s, settings.replica_lag_s, settings.replica_lag_bytes) == (
                5.0, 3.0, 8 << 20,
            )
            seen.append((settings.name, settings.replica_id, settings.advertised_address))
    assert len({(name, replica_id) for name, replica_id, _ in seen}) == len({a for _, _, a in seen}) == 4


def test_every_broker_set_has_a_budget_of_one_replica_down(production_release: Release) -> None:
    budgets = [o for o in production_release.objects if o["kind"] == "PodDisruptionBudget" and component(o) == "broker"]
    assert {b["metadata"]["name"]: b["spec"]["maxUnavailable"] for b in budgets} == {
        "mq-graymq-broker-0": 1, "mq-graymq-broker-1": 1,
    }
    for budget in budgets:
        [sts] = [s for s in production_release.brokers() if s["metadata"]["name"] == budget["metadata"]["name"]]
        assert budget["spec"]["selector"] == sts["spec"]["selector"]


def test_the_replicas_of_a_set_prefer_different_nodes(production_release: Release) -> None:
    for sts in production_release.brokers():
        anti = pod_spec(sts)["affinity"]["podAntiAffinity"]
        own_set = {"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": sts["spec"]["selector"],
        }}
        assert own_set in anti["preferredDuringSchedulingIgnoredDuringExecution"], kn(sts)
        # The production values' own rule (every broker pod on its own node) is kept.
        assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == (
            production_values()["broker"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        )


# Variables only the replicas of a broker set get (GRAYMQ_BROKER_NAME differs: the set's, not the pod's).
SET_ONLY_ENV = {
    "GRAYMQ_BROKER_NAME", "GRAYMQ_BROKER_REPLICA_ID", "GRAYMQ_BROKER_REPLICATION",
    "GRAYMQ_BROKER_REPLICATION_TIMEOUT_S", "GRAYMQ_BROKER_REPLICA_LAG_S", "GRAYMQ_BROKER_REPLICA_LAG_BYTES",
}


def test_every_broker_pod_gets_the_same_token_tls_and_dev_mode_wiring() -> None:
    values = {**TLS_VALUES, "nameserver": {"devMode": True}, "brokerToken": {"existingSecret": "mq-brokers"}}
    single = render(values, "TLS, dev mode, single copies").brokers()
    sets = render({**values, "broker": {"replication": "sync", "replicasPerSet": 2}}, "TLS, dev mode, sets").brokers()

    def without_set_env(sts: dict[str, Any]) -> dict[str, Any]:
        container = dict(pod_spec(sts)["containers"][0])
        container["env"] = [e for e in container["env"] if e["name"] not in SET_ONLY_ENV]
        return container

    assert len(sets) == 2
    for sts in sets:
        assert without_set_env(sts) == without_set_env(single[0]), kn(sts)
        assert pod_spec(sts)["volumes"] == pod_spec(single[0])["volumes"], kn(sts)
        env = env_of(pod_spec(sts)["containers"][0])
        assert env["GRAYMQ_DEV_MODE"]["value"] == "true"
        assert env["GRAYMQ_BROKER_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "mq-brokers"
        assert env["GRAYMQ_BROKER_TLS_CERT"]["value"] == f"{TLS_DIR}/tls.crt"


def test_broker_sets_are_refused_before_kubernetes_1_28_which_labels_pods_with_their_index() -> None:
    sets = {"broker": {"replication": "sync", "replicasPerSet": 2}}
    with pytest.raises(helm.HelmRenderError) as failure:
        render_native(sets, kube_version="v1.27.9")
    assert "broker.replication needs Kubernetes >= 1.28" in str(failure.value)
    assert render_native(sets, kube_version="v1.28.0").keys() == render_native({}, kube_version="v1.27.9").keys()


def test_broker_sets_follow_the_values() -> None:
    values = {
        "broker": {"replication": "async", "sets": 3, "replicasPerSet": 3, "replicationTimeoutSeconds": 2,
                   "replicaLagSeconds": 1.5, "replicaLagBytes": 1048576},
        "nameserver": {"replicaLeaseSeconds": 6},
    }
    release = render(values, "3 async sets of 3")
    assert [(b["metadata"]["name"], b["spec"]["replicas"]) for b in release.brokers()] == [
        ("mq-graymq-broker-0", 3), ("mq-graymq-broker-1", 3), ("mq-graymq-broker-2", 3),
    ]
    env = env_of(pod_spec(release.brokers()[2])["containers"][0])
    assert {n: env[n]["value"] for n in (
        "GRAYMQ_BROKER_REPLICATION", "GRAYMQ_BROKER_REPLICATION_TIMEOUT_S", "GRAYMQ_BROKER_REPLICA_LAG_S",
        "GRAYMQ_BROKER_REPLICA_LAG_BYTES",
    )} == {
        "GRAYMQ_BROKER_REPLICATION": "async", "GRAYMQ_BROKER_REPLICATION_TIMEOUT_S": "2",
        "GRAYMQ_BROKER_REPLICA_LAG_S": "1.5", "GRAYMQ_BROKER_REPLICA_LAG_BYTES": "1048576",
    }
    # No affinity given: the chart's own preference alone.
    assert list(pod_spec(release.brokers()[0])["affinity"]) == ["podAntiAffinity"]
    nameserver = env_of(pod_spec(release.find("Deployment"))["containers"][0])
    assert nameserver["GRAYMQ_REPLICA_LEASE_SECONDS"]["value"] == "6"


# --- probes and security -------------------------------------------------------------------------------


def test_probes_hit_the_real_endpoints(release: Release) -> None:
    nameserver = pod_spec(release.find("Deployment"))["containers"][0]
    scheme = nameserver_scheme(release)
    probe_scheme = {"scheme": "HTTPS"} if scheme == "https" else {}
    for probe in ("startupProbe", "livenessProbe"):
        assert nameserver[probe]["httpGet"] == {"path": "/healthz", "port": scheme, **probe_scheme}
    assert nameserver["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": scheme, **probe_scheme}
    http_port = {p["name"]: p["containerPort"] for p in nameserver["ports"]}[scheme]
    assert env_of(nameserver)["GRAYMQ_PORT"]["value"] == str(http_port)
    for brokers in release.brokers():
        broker = pod_spec(brokers)["containers"][0]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert broker[probe] == {**broker[probe], "tcpSocket": {"port": "broker"}}, kn(brokers)
        broker_port = {p["name"]: p["containerPort"] for p in broker["ports"]}["broker"]
        assert env_of(broker)["GRAYMQ_BROKER_PORT"]["value"] == str(broker_port), kn(brokers)


def test_brokers_serve_stock_clients_grpc_at_8081_through_the_headless_service(release: Release) -> None:
    grpc_port = release.merged["broker"]["grpcPort"]
    assert grpc_port == 8081  # the RocketMQ proxy's port: a stock SDK's usual endpoint
    headless = release.find("Service", "-broker-headless")
    assert {"name": "grpc", "port": grpc_port, "targetPort": "grpc", "protocol": "TCP"} in headless["spec"]["ports"]
    for brokers in release.brokers():
        broker = pod_spec(brokers)["containers"][0]
        assert {p["name"]: p["containerPort"] for p in broker["ports"]}["grpc"] == grpc_port, kn(brokers)
        assert env_of(broker)["GRAYMQ_BROKER_GRPC_PORT"]["value"] == str(grpc_port), kn(brokers)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):  # health stays the broker port's
            assert broker[probe]["tcpSocket"] == {"port": "broker"}, kn(brokers)
    notes = next(text for path, text in release.manifests.items() if path.endswith("NOTES.txt"))
    assert f"{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{grpc_port}" in notes


def test_grpc_port_zero_renders_no_grpc_endpoint() -> None:
    release = render({"broker": {"grpcPort": 0}}, "no gRPC")
    assert "grpc" not in [p["name"] for p in release.find("Service", "-broker-headless")["spec"]["ports"]]
    broker = pod_spec(release.brokers()[0])["containers"][0]
    assert "grpc" not in [p["name"] for p in broker["ports"]]
    assert "GRAYMQ_BROKER_GRPC_PORT" not in env_of(broker)


def test_every_container_runs_as_non_root_on_a_read_only_root_filesystem(release: Release) -> None:
    for workload in release.workloads():
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True, kn(workload)
        assert spec["automountServiceAccountToken"] is False, kn(workload)
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"], kn(workload)
        for container in containers(workload):
            context = container["securityContext"]
            where = f"{kn(workload)}/{container['name']}"
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "resources" in container, where


# --- admin tokens ---------------------------------------------------------------------------------------


def test_a_generated_admin_token_is_real_and_accepted_outside_dev_mode(default_release: Release) -> None:
    from graymq.nameserver.settings import DEV_TOKEN, NameServerSettings

    secret = default_release.find("Secret", "-admin-tokens")
    tokens = base64.b64decode(secret["data"]["admin-tokens"]).decode()
    name, _, value = tokens.partition("=")
    assert name == "admin" and len(value) == 40 and value != DEV_TOKEN
    settings = NameServerSettings.model_validate({"admin_tokens": tokens, "dev_mode": False})
    assert settings.token_actors() == {value: "admin"}
    nameserver = pod_spec(default_release.find("Deployment"))["containers"][0]
    assert env_of(nameserver)["GRAYMQ_DEV_MODE"]["value"] == "false"
    assert env_of(nameserver)["GRAYMQ_ADMIN_TOKENS"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"], "key": "admin-tokens",
    }


@pytest.mark.parametrize("template", ["nameserver-deployment.yaml", "broker-statefulset.yaml"])
def test_rendering_again_does_not_roll_the_name_servers_or_brokers(default_release: Release, template: str) -> None:
    # The generated tokens differ per offline render; the pod templates must not depend on them.
    path = f"graymq/templates/{template}"
    assert render({}, "again").manifests[path] == default_release.manifests[path]


def test_given_admin_tokens_are_rendered_as_the_name_server_expects() -> None:
    from graymq.nameserver.settings import parse_admin_tokens

    tokens = {"ops": "0123456789abcdefXYZ", "ci": "fedcba9876543210xyz"}
    secret = render({"adminTokens": {"tokens": tokens}}, "given tokens").find("Secret", "-admin-tokens")
    assert parse_admin_tokens(base64.b64decode(secret["data"]["admin-tokens"]).decode()) == tokens


# --- the brokers' token -----------------------------------------------------------------------------------

# What an operator's Secrets hold in the production values (the chart renders none of them there).
USER_SECRETS = {
    "graymq-db": {"db-url": "postgresql+psycopg://graymq:pw@db.internal:5432/graymq"},
    "graymq-admin-tokens": {"admin-tokens": "ops=ops-token-0123456789,ci=ci-token-0123456789"},
    "graymq-broker-token": {"broker-token": "broker-token-0123456789"},
}


def load_settings(settings_class: type[Any], environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``settings_class()`` loaded from ``environment`` alone (the test process's GRAYMQ_* variables removed)."""
    with monkeypatch.context() as env:
        for name in [n for n in os.environ if n.startswith("GRAYMQ_")]:
            env.delenv(name)
        for name, value in environment.items():
            env.setenv(name, value)
        return settings_class()


def server_settings(release: Release, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(NameServerSettings, BrokerSettings of the first broker pod) loaded from the environment the kubelet
    gives each container."""
    from graymq.broker_ext.config import BrokerSettings
    from graymq.nameserver.settings import NameServerSettings

    secrets = {**USER_SECRETS, **rendered_secrets(release)}
    return tuple(
        load_settings(cls, kubelet_env(pod_spec(workload)["containers"][0], secrets, release.broker_pod), monkeypatch)
        for workload, cls in ((release.find("Deployment"), NameServerSettings), (release.brokers()[0], BrokerSettings))
    )


def test_brokers_and_name_servers_start_outside_dev_mode_with_the_broker_token(
    release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    nameserver, broker = server_settings(release, monkeypatch)
    assert not nameserver.dev_mode and not broker.dev_mode
    broker.refuse_insecure()  # a token and a name server: the broker starts
    admin_actors = nameserver.token_actors()
    assert nameserver.broker_token_actors() == {broker.token: "brokers"}
    assert broker.token not in admin_actors  # the broker right only
    # A single-copy broker is named after its pod, the replicas of a set after their StatefulSet.
    assert broker.name == (release.brokers()[0]["metadata"]["name"] if broker.replication else release.broker_pod)


def test_brokers_never_get_the_admin_tokens(release: Release, monkeypatch: pytest.MonkeyPatch) -> None:
    nameserver, _ = server_settings(release, monkeypatch)
    secrets = {**USER_SECRETS, **rendered_secrets(release)}
    for brokers in release.brokers():
        env = kubelet_env(pod_spec(brokers)["containers"][0], secrets, f"{brokers['metadata']['name']}-0")
        assert not {"GRAYMQ_ADMIN_TOKENS", "GRAYMQ_ADMIN_TOKEN"} & env.keys(), kn(brokers)
        assert not set(nameserver.admin_tokens.values()) & set(env.values()), kn(brokers)


def test_a_generated_broker_token_is_its_own_and_named_for_the_name_servers(default_release: Release) -> None:
    secrets = rendered_secrets(default_release)
    token = secrets["mq-graymq-broker-token"]["broker-token"]
    admin_token = secrets["mq-graymq-admin-tokens"]["admin-tokens"].partition("=")[2]
    assert len(token) == 40 and token != admin_token
    assert secrets["mq-graymq-broker-token"]["broker-tokens"] == f"brokers={token}"
    nameserver = env_of(pod_spec(default_release.find("Deployment"))["containers"][0])
    assert nameserver["GRAYMQ_BROKER_TOKENS"]["valueFrom"]["secretKeyRef"] == {
        "name": "mq-graymq-broker-token", "key": "broker-tokens",
    }
    broker = env_of(pod_spec(default_release.find("StatefulSet", "-broker"))["containers"][0])
    assert broker["GRAYMQ_BROKER_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "mq-graymq-broker-token", "key": "broker-token",
    }


def test_a_given_broker_token_is_used_as_is() -> None:
    given = "given-broker-token-0123456789"
    release = render({"brokerToken": {"token": given, "generatedName": "fleet"}}, "given broker token")
    assert rendered_secrets(release)["mq-graymq-broker-token"] == {
        "broker-token": given, "broker-tokens": f"fleet={given}",
    }


def test_an_existing_broker_token_secret_is_referenced_and_named_for_the_name_servers() -> None:
    from graymq.nameserver.settings import NameServerSettings

    values = {"brokerToken": {"existingSecret": "mq-brokers", "existingSecretKey": "token", "generatedName": "edge"}}
    release = render(values, "existing broker token Secret")
    assert "mq-graymq-broker-token" not in rendered_secrets(release)
    ref = {"name": "mq-brokers", "key": "token"}
    broker = env_of(pod_spec(release.find("StatefulSet", "-broker"))["containers"][0])
    assert broker["GRAYMQ_BROKER_TOKEN"]["valueFrom"]["secretKeyRef"] == ref
    container = pod_spec(release.find("Deployment"))["containers"][0]
    assert env_of(container)["BROKER_TOKEN"]["valueFrom"]["secretKeyRef"] == ref
    assert env_of(container)["GRAYMQ_BROKER_TOKENS"]["value"] == "edge=$(BROKER_TOKEN)"
    secrets = {**rendered_secrets(release), "mq-brokers": {"token": "users-broker-token-0123"}}
    broker_tokens = kubelet_env(container, secrets, "ns")["GRAYMQ_BROKER_TOKENS"]
    settings = NameServerSettings.model_validate({"broker_tokens": broker_tokens})
    assert settings.broker_token_actors() == {"users-broker-token-0123": "edge"}


def pod_annotations(release: Release, kind: str, suffix: str) -> dict[str, str]:
    return release.find(kind, suffix)["spec"]["template"]["metadata"].get("annotations", {})


def test_a_new_broker_token_rolls_name_servers_and_brokers_a_new_admin_token_only_name_servers(
    default_release: Release, production_release: Release,
) -> None:
    new_broker = render({"brokerToken": {"token": "given-broker-token-0123456789"}}, "new broker token")
    new_admin = render({"adminTokens": {"tokens": {"ops": "0123456789abcdefXYZ"}}}, "new admin token")
    for kind, suffix in (("Deployment", "-nameserver"), ("StatefulSet", "-broker")):
        before = pod_annotations(default_release, kind, suffix)["checksum/broker-token"]
        assert pod_annotations(new_broker, kind, suffix)["checksum/broker-token"] != before, kind
    brokers = ("StatefulSet", "-broker")
    assert pod_annotations(new_admin, *brokers) == pod_annotations(default_release, *brokers)
    # A user's Secret is the user's to roll (kubectl rollout restart), as with the admin tokens.
    for sts in production_release.brokers():
        assert "checksum/broker-token" not in sts["spec"]["template"]["metadata"]["annotations"], kn(sts)


def test_dev_mode_runs_the_brokers_in_dev_mode_and_keeps_their_token(monkeypatch: pytest.MonkeyPatch) -> None:
    release = render({"nameserver": {"devMode": True}}, "dev mode")
    nameserver, broker = server_settings(release, monkeypatch)
    assert nameserver.dev_mode and broker.dev_mode
    assert nameserver.broker_token_actors() == {broker.token: "brokers"} and broker.token
    notes = release.manifests["graymq/templates/NOTES.txt"]
    assert "authentication is off on the name servers and the brokers" in notes


def test_a_broker_token_shared_with_an_admin_token_is_refused_when_rendering() -> None:
    shared = "0123456789abcdefXYZ"
    with pytest.raises(helm.HelmRenderError) as failure:
        render({"adminTokens": {"tokens": {"ops": shared}}, "brokerToken": {"token": shared}}, "shared token")
    assert "give the brokers their own token" in str(failure.value)


# --- values.schema.json ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"broker": {"flush": "fast"}}, "/broker/flush"),
        ({"broker": {"replicaCount": 0}}, "/broker/replicaCount"),
        ({"broker": {"replication": "sync", "replicasPerSet": 0}}, "/broker/replicasPerSet"),
        ({"broker": {"replication": "semi-sync"}}, "/broker/replication"),
        # Pods sharing a broker name that do not replicate would be two brokers claiming one name.
        ({"broker": {"replicasPerSet": 2}}, "/broker/replicasPerSet"),
        ({"broker": {"replication": "sync", "sets": 0}}, "/broker/sets"),
        ({"broker": {"replication": "sync", "replicasPerSet": 65}}, "/broker/replicasPerSet"),  # replica ids 0..63
        ({"nameserver": {"replicaLeaseSeconds": 0}}, "/nameserver/replicaLeaseSeconds"),
        ({"broker": {"port": 70000}}, "/broker/port"),
        ({"broker": {"grpcPort": 70000}}, "/broker/grpcPort"),
        ({"broker": {"segmentSize": 100}}, "/broker/segmentSize"),
        ({"broker": {"flushMode": "sync"}}, "flushMode"),  # a typo is an error, not silently ignored
        ({"nameserver": {"replicaCount": "2"}}, "/nameserver/replicaCount"),
        ({"logLevel": "VERBOSE"}, "/logLevel"),
        ({"adminTokens": {"tokens": {"ops": "dev-token"}}}, "/adminTokens/tokens/ops"),
        ({"brokerToken": {"token": "too-short"}}, "/brokerToken/token"),
        ({"brokerToken": {"token": "0123456789abcdef,ops=x"}}, "/brokerToken/token"),
        ({"brokerToken": {"generatedName": "two words"}}, "/brokerToken/generatedName"),
        ({"brokerToken": {"secretName": "mine"}}, "secretName"),
        ({"broker": {"autoCreateTopic": True}}, "/nameserver/devMode"),  # a broker refuses it outside dev mode
        ({"postgresql": {"enabled": False}}, "/externalDatabase/existingSecret"),
        ({"postgresql": {"password": "p@ss word"}}, "/postgresql/password"),
        ({"tls": {"enabled": True}}, "/tls/existingSecret"),
        ({"tls": {"enabled": "yes"}}, "/tls/enabled"),
        ({"tls": {"secretName": "mq-tls"}}, "secretName"),
    ],
)
def test_values_schema_rejects_bad_values_and_the_render_fails(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmValuesError) as failure:
        render(values, f"bad values {values}")
    assert complaint in str(failure.value)


def test_default_image_tag_is_the_version_of_the_package() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with helm.Chart.load(CHART) as chart:
        assert chart.metadata["appVersion"] == project["version"]


def test_notes_say_how_to_reach_the_api_and_run_a_cutover(default_release: Release) -> None:
    notes = default_release.manifests["graymq/templates/NOTES.txt"]
    assert "port-forward svc/mq-graymq-nameserver 9876:9876" in notes
    assert "graymq gray status GROUP" in notes
    assert "graymq gray promote GROUP" in notes
    assert "broker token  secret/mq-graymq-broker-token, key broker-token" in notes


# --- TLS ----------------------------------------------------------------------------------------------

TLS_DIR = "/etc/graymq/tls"


def tls_env(container: dict[str, Any]) -> dict[str, str]:
    return {name: entry["value"] for name, entry in env_of(container).items() if "TLS" in name}


@pytest.mark.parametrize("name", ["default", "production"])
def test_tls_is_off_by_default_plain_http_and_no_secret_mounted(name: str, request: pytest.FixtureRequest) -> None:
    release: Release = request.getfixturevalue(f"{name}_release")
    assert release.merged["tls"]["enabled"] is False
    for workload in release.workloads():
        assert all("secret" not in v for v in pod_spec(workload)["volumes"]), kn(workload)
        for container in containers(workload):
            assert not tls_env(container), f"{kn(workload)}/{container['name']}"
    service = release.find("Service", "-nameserver")
    assert [p["name"] for p in service["spec"]["ports"]] == ["http"]
    for brokers in release.brokers():
        broker = pod_spec(brokers)["containers"][0]
        assert env_of(broker)["GRAYMQ_BROKER_NAMESERVER"]["value"].startswith("http://"), kn(brokers)


def test_tls_mounts_the_secret_read_only_into_name_server_and_broker_pods(tls_release: Release) -> None:
    for workload in (tls_release.find("Deployment"), tls_release.find("StatefulSet", "-broker")):
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        assert volumes["tls"]["secret"]["secretName"] == "mq-tls", kn(workload)
        # group-readable only: the pod's fsGroup owns the files; the key is not world-readable
        assert volumes["tls"]["secret"]["defaultMode"] == 0o440, kn(workload)
        container = pod_spec(workload)["containers"][0]
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["tls"] == {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}, kn(workload)
    # The migrations Job reaches only the database: no certificate there.
    job = tls_release.find("Job", "-migrate")
    assert "tls" not in {v["name"] for v in pod_spec(job)["volumes"]}


def test_tls_env_names_the_mounted_files_and_the_settings_load_them(
    tls_release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graymq.broker_ext.config import BrokerSettings
    from graymq.nameserver.settings import NameServerSettings

    nameserver = pod_spec(tls_release.find("Deployment"))["containers"][0]
    broker = pod_spec(tls_release.find("StatefulSet", "-broker"))["containers"][0]
    assert tls_env(nameserver) == {
        "GRAYMQ_TLS_CERT": f"{TLS_DIR}/tls.crt", "GRAYMQ_TLS_KEY": f"{TLS_DIR}/tls.key",
        "GRAYMQ_TLS_CA": f"{TLS_DIR}/ca.crt",
    }
    assert tls_env(broker) == {
        "GRAYMQ_BROKER_TLS_CERT": f"{TLS_DIR}/tls.crt", "GRAYMQ_BROKER_TLS_KEY": f"{TLS_DIR}/tls.key",
        "GRAYMQ_TLS_CA": f"{TLS_DIR}/ca.crt",
    }
    for name, value in {**tls_env(nameserver), **tls_env(broker)}.items():
        monkeypatch.setenv(name, value)
    ns_settings = NameServerSettings()
    assert (str(ns_settings.tls_cert), str(ns_settings.tls_key)) == (f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key")
    broker_settings = BrokerSettings()
    assert (str(broker_settings.tls_cert), str(broker_settings.tls_key)) == (
        f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key",
    )


def test_tls_without_ca_cert_leaves_verification_to_the_system_store() -> None:
    release = render({"tls": {"enabled": True, "existingSecret": "mq-tls"}}, "TLS without ca.crt")
    for workload in (release.find("Deployment"), release.find("StatefulSet", "-broker")):
        env = tls_env(pod_spec(workload)["containers"][0])
        assert "GRAYMQ_TLS_CA" not in env and env, kn(workload)
    assert "without ca.crt" in release.manifests["graymq/templates/NOTES.txt"]


def test_tls_makes_the_name_server_https_for_brokers_probes_and_the_service(tls_release: Release) -> None:
    host = f"mq-graymq-nameserver.{NAMESPACE}.svc.cluster.local"
    broker = pod_spec(tls_release.find("StatefulSet", "-broker"))["containers"][0]
    assert env_of(broker)["GRAYMQ_BROKER_NAMESERVER"]["value"] == f"https://{host}:9876"
    service = tls_release.find("Service", "-nameserver")
    assert service["spec"]["ports"][0] == {"name": "https", "port": 9876, "targetPort": "https", "protocol": "TCP"}
    notes = tls_release.manifests["graymq/templates/NOTES.txt"]
    assert f"GRAYMQ_NAMESERVER=https://{host}:9876" in notes
    assert "http://" not in notes
