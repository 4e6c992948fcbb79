"""The Helm chart renders clean: helm lint, strict Kubernetes schemas, kinds, labels, values schema.

Needs helm (scripts/install-tools puts it in .tools/bin). Without it these
tests skip, except under CI (the CI variable set), where they fail.

Every rendered object is validated against the Kubernetes API schemas in
strict mode (kubernetes-validate, pinned version); CRD kinds it has no schema
for are listed in CRD_KINDS (tests/support/helm.py) and checked structurally.

`python -m tests.support.helm` prints the objects each scenario renders.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.support.helm import CHART
from tests.support.helm import CRD_KINDS
from tests.support.helm import KUBE_VERSION
from tests.support.helm import RELEASE
from tests.support.helm import SCENARIOS
from tests.support.helm import Manifest
from tests.support.helm import chart_values
from tests.support.helm import helm
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import render_fails
from tests.support.helm import values_file

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
    "all-optional": BASE_OBJECTS | {"HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule"},
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_kinds(scenario: str) -> None:
    kinds = [o["kind"] for o in render(scenario)]
    dashboards = 1 if scenario == "all-optional" else 0  # a second ConfigMap
    assert sorted(kinds) == sorted([*EXPECTED_OBJECTS[scenario]] + ["ConfigMap"] * dashboards)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recommended_labels_everywhere(scenario: str) -> None:
    for obj in render(scenario):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "memory-plugin-vector"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


# --- schema ------------------------------------------------------------------------------------


def test_schema_accepts_a_known_key_and_rejects_a_typo() -> None:
    assert one(render("qdrant-server", "replicaCount=3"), "Deployment")["spec"]["replicas"] == 3
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
        "config.durability=fast",
        "config.engineWorkers=3",
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
# extraVolumes: a Volume's one source (configMap, csi, ...), named by a closed list of keys.
VOLUME_SOURCES = "/definitions/volume/properties/"


def test_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = []
    for path, node in schema_objects(schema):
        closed = node.get("additionalProperties") is False
        string_map = node.get("additionalProperties") == {"type": "string"}
        source = path.startswith(VOLUME_SOURCES) and path != f"{VOLUME_SOURCES}name"
        if not (closed or string_map or path in PASSTHROUGH or source):
            open_objects.append(path)
    assert open_objects == []


def test_values_yaml_keys_are_all_in_the_schema() -> None:
    """values.yaml validates against its own schema (helm does this too; this names the key)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    for scenario in SCENARIOS:
        jsonschema.validate(chart_values(scenario), schema)
