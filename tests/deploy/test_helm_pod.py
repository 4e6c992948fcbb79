"""The Helm chart in deploy/helm/memory-plugin-vector, rendered and checked offline.

Needs helm (scripts/install-tools puts it in .tools/bin). Without it these
tests skip, except under CI (the CI variable set), where they fail.

Every rendered object is validated against the Kubernetes API schemas in
strict mode (kubernetes-validate, pinned version); CRD kinds it has no schema
for are listed in CRD_KINDS and checked structurally here instead.

`python -m tests.test_helm_chart` prints the objects each scenario renders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from aiohttp import web

from plugin.settings import Settings
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "memory-plugin-vector"
RELEASE = "mem"
NAMESPACE = "agents"
FULLNAME = f"{RELEASE}-memory-plugin-vector"
KUBE_VERSION = "1.33.0"
# Kinds kubernetes-validate has no schema for (CRDs): checked in tests below.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
SCENARIOS = ["qdrant-server", "embedded", "pinecone", "all-optional"]
# Environment the pod gets besides the plugin's own settings.
RUNTIME_ENV = {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HOME", "OMP_NUM_THREADS"}

Manifest = dict[str, Any]


def find_helm() -> str | None:
    local = ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("helm")


@cache
def _helm_path() -> str:
    return require_tool(find_helm(), "helm", "scripts/test runs scripts/install-tools")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_helm_path(), *args], capture_output=True, text=True, timeout=60, check=False
    )


def values_file(scenario: str) -> str:
    return str(CHART / "ci" / f"{scenario}-values.yaml")


def template_args(scenario: str | None, *sets: str) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += ["--kube-version", KUBE_VERSION]
    if scenario is not None:
        args += ["--values", values_file(scenario)]
    for item in sets:
        args += ["--set", item]
    return args


@cache
def _render(scenario: str | None, sets: tuple[str, ...]) -> tuple[Manifest, ...]:
    result = helm(*template_args(scenario, *sets))
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(scenario: str | None = None, *sets: str) -> list[Manifest]:
    return list(_render(scenario, sets))


def render_fails(scenario: str | None, *sets: str) -> str:
    result = helm(*template_args(scenario, *sets))
    assert result.returncode != 0, f"helm template succeeded with {sets}"
    return result.stderr


def one(objects: list[Manifest], kind: str) -> Manifest:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def server_container(objects: list[Manifest]) -> Manifest:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["plugin"]
    return containers[0]


def helm_test_pod(objects: list[Manifest]) -> Manifest:
    return one(objects, "Pod")


def selects(selector: Manifest, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector matches `labels` (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, op, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True


def chart_values(scenario: str) -> Manifest:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    override = yaml.safe_load(Path(values_file(scenario)).read_text())

    def merge(base: Manifest, top: Manifest) -> Manifest:
        out = dict(base)
        for key, value in top.items():
            both_maps = isinstance(value, dict) and isinstance(base.get(key), dict)
            out[key] = merge(base[key], value) if both_maps else value
        return out

    return merge(defaults, override)


# --- helm lint and schema validation of every object --------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_helm_lint_is_clean(scenario: str) -> None:
    result = helm("lint", "--strict", str(CHART), "--values", values_file(scenario))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_is_valid_kubernetes(scenario: str) -> None:
    problems = []
    for obj in render(scenario):
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {error.message}")
    assert problems == []


def test_strict_validation_catches_an_unknown_field() -> None:
    """The validator used above really is strict (guards the test itself)."""
    deployment = json.loads(json.dumps(one(render("qdrant-server"), "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)


# Every scenario renders these; embedded adds its claim, all-optional its extras.
BASE_OBJECTS = {
    "ConfigMap",
    "Deployment",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "Service",
    "ServiceAccount",
    "Pod",
}
EXPECTED_OBJECTS = {
    "qdrant-server": BASE_OBJECTS,
    "pinecone": BASE_OBJECTS,
    "embedded": BASE_OBJECTS | {"PersistentVolumeClaim"},
    "all-optional": BASE_OBJECTS | {"HorizontalPodAutoscaler", "ServiceMonitor"},
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_kinds(scenario: str) -> None:
    kinds = [o["kind"] for o in render(scenario)]
    assert sorted(kinds) == sorted(EXPECTED_OBJECTS[scenario])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recommended_labels_everywhere(scenario: str) -> None:
    for obj in render(scenario):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "memory-plugin-vector"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


# --- the server pod ---------------------------------------------------------------------


def plugin_get_routes() -> set[str]:
    from plugin.http.handlers import routes

    return {r.path for r in routes if isinstance(r, web.RouteDef) and r.method == "GET"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_probes_on_the_plugin_port(scenario: str) -> None:
    container = server_container(render(scenario))
    assert container["ports"] == [{"name": "http", "containerPort": 9100, "protocol": "TCP"}]
    paths = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "http"
        paths[probe] = container[probe]["httpGet"]["path"]
        # /v1/health may take the backend deadline (1.5 s) to answer.
        assert container[probe]["timeoutSeconds"] >= 2
    # Ready means the backend answers too; alive means only the process does,
    # so a backend outage takes pods out of the Service without restarting them.
    assert paths == {
        "startupProbe": "/metrics",
        "readinessProbe": "/v1/health",
        "livenessProbe": "/metrics",
    }
    assert set(paths.values()) <= plugin_get_routes()
    startup = container["startupProbe"]
    # The model takes ~4 s on 2 idle cores; a slow node gets a couple of minutes.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_server_runs_serve_with_the_listen_address_of_the_port(scenario: str) -> None:
    objects = render(scenario)
    container = server_container(objects)
    assert container["args"] == ["serve"]
    assert "command" not in container  # the image's ENTRYPOINT, memory-plugin-vector
    data = one(objects, "ConfigMap")["data"]
    assert data["MEMORY_PLUGIN_LISTEN_ADDR"] == "0.0.0.0:9100"
    assert container["envFrom"] == [{"configMapRef": {"name": FULLNAME}}]


def assert_locked_down(pod_spec: Manifest) -> None:
    security = pod_spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == 10001
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False
    for container in pod_spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context.get("privileged", False) is False
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]  # the only writable place but /data


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_pods_are_locked_down(scenario: str) -> None:
    objects = render(scenario)
    assert_locked_down(one(objects, "Deployment")["spec"]["template"]["spec"])
    assert_locked_down(helm_test_pod(objects)["spec"])
    account = one(objects, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_resources_and_graceful_termination(scenario: str) -> None:
    objects = render(scenario)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    container = server_container(objects)
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert container["resources"]["limits"] == {"memory": "2Gi"}
    assert pod["terminationGracePeriodSeconds"] == 30
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    # preStop sleep + the server's 10 s drain fits in the grace period.
    assert int(sleep[1]) + 10 <= pod["terminationGracePeriodSeconds"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_configmap_is_exactly_what_the_plugin_reads(scenario: str) -> None:
    """Every key is a setting the plugin knows, and together they validate."""
    objects = render(scenario)
    data = dict(one(objects, "ConfigMap")["data"])
    assert {k: data.pop(k) for k in sorted(RUNTIME_ENV)} == {
        "HF_HUB_OFFLINE": "1",
        "HOME": "/tmp",
        "OMP_NUM_THREADS": "2",
        "TRANSFORMERS_OFFLINE": "1",
    }
    known = {field.alias for field in Settings.model_fields.values()}
    assert set(data) <= known
    # A path inside the image, so not checked here; absent when empty.
    model = data.pop("MEMORY_PLUGIN_EMBEDDING_MODEL", "")
    assert model == chart_values(scenario)["config"]["embeddingModel"]
    secrets = {e["name"]: "from-a-secret" for e in server_container(objects).get("env", [])}
    settings = Settings.from_env(data | secrets)
    config = chart_values(scenario)["config"]
    assert settings.listen == ("0.0.0.0", 9100)
    assert settings.collection_prefix == config["collectionPrefix"]
    assert settings.embedding_sessions == config["embeddingSessions"]
    assert settings.search == (config["search"] or None)


# --- secrets --------------------------------------------------------------------------


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_secrets_come_only_from_secret_key_refs(scenario: str) -> None:
    objects = render(scenario)
    assert not [o for o in objects if o["kind"] == "Secret"]
    for obj in objects:
        for node in walk(obj):
            if (
                isinstance(node, dict)
                and "name" in node
                and ("value" in node or "valueFrom" in node)
            ):
                secretish = any(word in node["name"] for word in ("KEY", "SECRET", "TOKEN"))
                if secretish:
                    assert "value" not in node, node
                    assert set(node["valueFrom"]) == {"secretKeyRef"}, node
    data = one(objects, "ConfigMap")["data"]
    assert not [key for key in data if "KEY" in key or "SECRET" in key]


def env_refs(objects: list[Manifest]) -> dict[str, Manifest]:
    return {e["name"]: e["valueFrom"] for e in server_container(objects).get("env", [])}


def test_qdrant_layout_can_be_collections() -> None:
    data = one(render("qdrant-server", "qdrant.layout=collections"), "ConfigMap")["data"]
    assert Settings.from_env(dict(data)).qdrant_layout == "collections"
    assert "layout" in render_fails("qdrant-server", "qdrant.layout=tenants")


def test_qdrant_server_backend() -> None:
    objects = render("qdrant-server")
    data = one(objects, "ConfigMap")["data"]
    assert data["MEMORY_PLUGIN_BACKEND"] == "qdrant"
    assert data["QDRANT_URL"] == "http://qdrant:6333"
    assert data["MEMORY_PLUGIN_QDRANT_LAYOUT"] == "shared"
    assert "MEMORY_PLUGIN_DATA_DIR" not in data
    assert env_refs(objects) == {
        "QDRANT_API_KEY": {"secretKeyRef": {"name": "qdrant-apikey", "key": "api-key"}}
    }
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_qdrant_without_api_key_sends_none() -> None:
    assert env_refs(render()) == {}


def test_qdrant_backend_needs_a_url() -> None:
    assert "qdrant.url" in render_fails(None, "qdrant.url=")


def test_pinecone_backend() -> None:
    objects = render("pinecone")
    data = one(objects, "ConfigMap")["data"]
    assert data["MEMORY_PLUGIN_BACKEND"] == "pinecone"
    assert data["PINECONE_INDEX"] == "agent-memory"
    assert "PINECONE_HOST" not in data
    assert "QDRANT_URL" not in data
    assert data["MEMORY_PLUGIN_PINECONE_FRESHNESS_WINDOW"] == "30"
    assert data["MEMORY_PLUGIN_PINECONE_OVERLAY_MAX"] == "5000"
    assert env_refs(objects) == {
        "PINECONE_API_KEY": {"secretKeyRef": {"name": "pinecone", "key": "api-key"}}
    }


def test_pinecone_host_instead_of_index() -> None:
    host = "https://agent-memory-abc123.svc.aped-4627-b74a.pinecone.io"
    data = one(render("pinecone", "pinecone.index=", f"pinecone.host={host}"), "ConfigMap")["data"]
    assert data["PINECONE_HOST"] == host
    assert "PINECONE_INDEX" not in data


def test_pinecone_needs_a_secret_and_an_index() -> None:
    assert "pinecone.apiKeySecret.name" in render_fails("pinecone", "pinecone.apiKeySecret.name=")
    assert "pinecone.index or pinecone.host" in render_fails("pinecone", "pinecone.index=")


def test_a_plaintext_key_is_rejected() -> None:
    for key in ("pinecone.apiKey=abc", "qdrant.apiKey=abc"):
        assert "apiKey" in render_fails("pinecone", key)


# --- embedded -------------------------------------------------------------------------


def test_embedded_is_one_replica_on_a_claim_recreated() -> None:
    objects = render("embedded")
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = one(objects, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == f"{FULLNAME}-data"
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "standard"
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert volumes[mounts["/data"]]["persistentVolumeClaim"] == {"claimName": f"{FULLNAME}-data"}
    data = one(objects, "ConfigMap")["data"]
    assert data["MEMORY_PLUGIN_BACKEND"] == "embedded"
    assert data["MEMORY_PLUGIN_DATA_DIR"] == "/data"
    assert "QDRANT_URL" not in data
    assert "MEMORY_PLUGIN_QDRANT_LAYOUT" not in data
    assert env_refs(objects) == {}


def test_embedded_can_use_an_existing_claim() -> None:
    objects = render("embedded", "embedded.persistence.existingClaim=memories")
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "memories"}} in volumes


def test_embedded_refuses_more_than_one_replica() -> None:
    assert "replicaCount must be 1" in render_fails("embedded", "replicaCount=2")


def test_embedded_refuses_autoscaling() -> None:
    assert "autoscaling.enabled must be false" in render_fails(
        "embedded", "autoscaling.enabled=true", "autoscaling.minReplicas=1"
    )


def test_other_backends_have_no_data_volume() -> None:
    for scenario in ("qdrant-server", "pinecone"):
        pod = one(render(scenario), "Deployment")["spec"]["template"]["spec"]
        assert [v["name"] for v in pod["volumes"]] == ["tmp"]


# --- Service and NetworkPolicy -----------------------------------------------------------


def pod_labels(objects: list[Manifest]) -> dict[str, str]:
    labels: dict[str, str] = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_service_is_cluster_ip_on_9100(scenario: str) -> None:
    objects = render(scenario)
    service = one(objects, "Service")
    assert service["metadata"]["name"] == FULLNAME
    assert service["spec"]["type"] == "ClusterIP"
    affinity = "ClientIP" if scenario == "pinecone" else None  # the overlay is per pod
    assert service["spec"].get("sessionAffinity") == affinity
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 9100, "targetPort": "http", "protocol": "TCP"}
    ]
    selector = {"matchLabels": service["spec"]["selector"]}
    assert selects(selector, pod_labels(objects))
    assert not selects(selector, helm_test_pod(objects)["metadata"]["labels"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_network_policy_admits_only_the_platform_and_the_test(scenario: str) -> None:
    objects = render(scenario)
    values = chart_values(scenario)["networkPolicy"]
    policy = one(objects, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"], pod_labels(objects))
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    platform, test_peer, *extra = rule["from"]
    assert platform["podSelector"] == values["platform"]["podSelector"]
    namespaces = values["platform"]["namespaceSelector"]
    if namespaces:
        assert platform["namespaceSelector"] == namespaces
    else:  # the release's own namespace: no namespaceSelector at all ({} would be every one)
        assert "namespaceSelector" not in platform
    assert test_peer == {"podSelector": test_peer["podSelector"]}  # same namespace only
    assert selects(test_peer["podSelector"], helm_test_pod(objects)["metadata"]["labels"])
    assert not selects(test_peer["podSelector"], {"app.kubernetes.io/name": "workspace-server"})
    assert extra == values["extraFrom"]


def test_network_policy_follows_values() -> None:
    objects = render(
        None,
        "networkPolicy.platform.podSelector.matchLabels.app=gateway",
        "networkPolicy.platform.namespaceSelector.matchLabels.team=core",
    )
    platform = one(objects, "NetworkPolicy")["spec"]["ingress"][0]["from"][0]
    assert platform["podSelector"]["matchLabels"] == {
        "app": "gateway",
        "app.kubernetes.io/name": "workspace-server",
    }
    assert platform["namespaceSelector"] == {"matchLabels": {"team": "core"}}


def test_network_policy_refuses_an_empty_platform_selector() -> None:
    stderr = render_fails(None, "networkPolicy.platform.podSelector.matchLabels=null")
    assert "would admit every pod" in stderr


def test_network_policy_can_be_turned_off() -> None:
    kinds = {o["kind"] for o in render(None, "networkPolicy.enabled=false")}
    assert "NetworkPolicy" not in kinds


# --- config checksum -----------------------------------------------------------------------


def checksum(objects: list[Manifest]) -> str:
    annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    value: str = annotations["checksum/config"]
    return value


def test_checksum_rolls_pods_on_config_change_only() -> None:
    base = checksum(render("qdrant-server"))
    assert len(base) == 64
    # A second helm run (not the cached render) gives the same sum.
    assert checksum(list(_render.__wrapped__("qdrant-server", ()))) == base
    assert checksum(render("qdrant-server", "config.logLevel=DEBUG")) != base
    assert checksum(render("qdrant-server", "qdrant.url=http://other:6333")) != base
    # Not in the ConfigMap: no restart needed, no change.
    assert checksum(render("qdrant-server", "replicaCount=3")) == base


# --- schema ------------------------------------------------------------------------------------


def test_schema_accepts_a_known_key_and_rejects_a_typo() -> None:
    assert one(render(None, "replicaCount=3"), "Deployment")["spec"]["replicas"] == 3
    stderr = render_fails(None, "replicaCont=3")
    assert "replicaCont" in stderr


@pytest.mark.parametrize(
    "typo",
    [
        "networkPolicy.enabeld=false",
        "probes.startup.failureTreshold=10",
        "resources.limit.memory=1Gi",
        "embedded.persistance.size=1Gi",
        "config.logLevel=TRACE",
        "backend=postgres",
    ],
)
def test_schema_rejects_nested_typos_and_bad_values(typo: str) -> None:
    render_fails(None, typo)


def schema_objects(node: Any, path: str = "") -> Iterator[tuple[str, Manifest]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield path, node
        for key, value in node.items():
            yield from schema_objects(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from schema_objects(value, f"{path}/{index}")


# Kubernetes objects passed through to the pod spec as they are; the API
# server validates their insides (their top-level keys are still closed).
PASSTHROUGH = {
    "/properties/affinity/properties/nodeAffinity",
    "/properties/affinity/properties/podAffinity",
    "/properties/affinity/properties/podAntiAffinity",
}


def test_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = []
    for path, node in schema_objects(schema):
        closed = node.get("additionalProperties") is False
        string_map = node.get("additionalProperties") == {"type": "string"}
        if not (closed or string_map or path in PASSTHROUGH):
            open_objects.append(path)
    assert open_objects == []


def test_values_yaml_keys_are_all_in_the_schema() -> None:
    """values.yaml validates against its own schema (helm does this too; this names the key)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    for scenario in SCENARIOS:
        jsonschema.validate(chart_values(scenario), schema)


# --- optional objects ------------------------------------------------------------------------


def test_hpa_replaces_replicas() -> None:
    objects = render("all-optional")
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": FULLNAME,
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    targets = {m["resource"]["name"]: m["resource"]["target"] for m in hpa["spec"]["metrics"]}
    assert targets == {
        "cpu": {"type": "Utilization", "averageUtilization": 60},
        "memory": {"type": "Utilization", "averageUtilization": 80},
    }
    assert "replicas" not in one(objects, "Deployment")["spec"]


def test_hpa_min_not_above_max() -> None:
    assert "minReplicas" in render_fails(
        None, "autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=2"
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_pdb_selects_the_server_pods(scenario: str) -> None:
    objects = render(scenario)
    pdb = one(objects, "PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"], pod_labels(objects))
    expected = chart_values(scenario)["podDisruptionBudget"]["maxUnavailable"]
    assert pdb["spec"]["maxUnavailable"] == expected


def test_service_monitor_scrapes_metrics_on_the_service_port() -> None:
    """ServiceMonitor is a CRD kubernetes-validate cannot check: its shape is checked here."""
    objects = render("all-optional")
    monitor = one(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = one(objects, "Service")
    assert set(monitor["spec"]) == {"selector", "namespaceSelector", "endpoints"}
    assert selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint == {
        "port": "http",
        "path": "/metrics",
        "interval": "15s",
        "scrapeTimeout": "10s",
    }
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_optional_objects_are_off_by_default() -> None:
    kinds = {o["kind"] for o in render()}
    assert "HorizontalPodAutoscaler" not in kinds
    assert "ServiceMonitor" not in kinds


def test_all_optional_pod_settings_reach_the_pod() -> None:
    objects = render("all-optional")
    values = chart_values("all-optional")
    pod = one(objects, "Deployment")["spec"]["template"]
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "memory-plugin"
    assert one(objects, "ServiceAccount")["metadata"]["name"] == "memory-plugin"
    assert spec["nodeSelector"] == values["nodeSelector"]
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]
    assert spec["topologySpreadConstraints"] == values["topologySpreadConstraints"]
    assert spec["priorityClassName"] == "platform-critical"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["metadata"]["labels"]["example.com/cost-centre"] == "memory"
    assert pod["metadata"]["annotations"]["example.com/team"] == "platform"
    image = values["image"]
    assert spec["containers"][0]["image"] == f"{image['repository']}@{image['digest']}"


# --- helm test -------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_helm_test_pod_runs_check_against_the_service(scenario: str) -> None:
    objects = render(scenario)
    pod = helm_test_pod(objects)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    [container] = spec["containers"]
    assert container["image"] == server_container(objects)["image"]
    url = f"http://{FULLNAME}.{NAMESPACE}.svc:9100"
    assert container["args"] == ["check", url]
    assert "command" not in container  # ENTRYPOINT memory-plugin-vector


def test_notes_walk_through_the_runbook() -> None:
    result = helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    for step in (
        f"helm test {RELEASE} -n {NAMESPACE}",
        "memory-backfill -dry-run",
        "memory-backfill -apply",
        "memory-backfill -verify -verify-sample=200",
        "MEMORY_V2_CUTOVER=true",
        f"MEMORY_PLUGIN_URL=http://{FULLNAME}.{NAMESPACE}.svc:9100",
    ):
        assert step in notes


# --- the object list, for humans ---------------------------------------------------------------


def main() -> None:
    if find_helm() is None:
        raise SystemExit("helm not found: run scripts/install-tools")
    for scenario in SCENARIOS:
        print(f"{scenario} (ci/{scenario}-values.yaml):")
        for obj in render(scenario):
            print(f"  {obj['kind']}/{obj['metadata']['name']}")


if __name__ == "__main__":
    main()
