"""The Helm chart's Service, NetworkPolicy, config checksum and optional objects (HPA, PDB, ...)."""

from __future__ import annotations

import pytest

from tests.support.helm import FULLNAME
from tests.support.helm import NAMESPACE
from tests.support.helm import SCENARIOS
from tests.support.helm import Manifest
from tests.support.helm import _render
from tests.support.helm import chart_values
from tests.support.helm import helm_test_pod
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import render_fails
from tests.support.helm import selects

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
        "qdrant-server",
        "autoscaling.enabled=true",
        "autoscaling.minReplicas=5",
        "autoscaling.maxReplicas=2",
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_pdb_selects_the_server_pods(scenario: str) -> None:
    objects = render(scenario)
    pdb = one(objects, "PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"], pod_labels(objects))
    values = chart_values(scenario)["podDisruptionBudget"]
    budget = {k: pdb["spec"].get(k) for k in ("maxUnavailable", "minAvailable")}
    assert budget == {k: values[k] for k in budget}
    assert pdb["spec"].get("unhealthyPodEvictionPolicy", "") == values["unhealthyPodEvictionPolicy"]


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
    assert "PrometheusRule" not in kinds


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
    assert spec["volumes"][1:] == values["extraVolumes"]
    assert spec["containers"][0]["volumeMounts"][1:] == values["extraVolumeMounts"]
