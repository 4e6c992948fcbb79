"""The values operators bend the server pod with: security contexts, extra volumes and
mounts, probes, extraEnv over the chart's own entries, the PodDisruptionBudget's options.

Each renders as values.yaml documents it, validates as Kubernetes (strict), and the values
schema still refuses a key it does not know. Helm: tests/support/helm.py.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.support.helm import KUBE_VERSION
from tests.support.helm import Manifest
from tests.support.helm import helm_test_pod
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import render_fails
from tests.support.helm import server_container
from tests.support.helm import set_json

OPENSHIFT_UID = 1000770000


def pod_spec(objects: list[Manifest]) -> Manifest:
    spec: Manifest = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def assert_valid(objects: list[Manifest]) -> None:
    for obj in objects:
        if obj["kind"] in {"Deployment", "Pod", "PodDisruptionBudget"}:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def env_of(container: Manifest) -> list[Manifest]:
    env: list[Manifest] = container.get("env", [])
    return env


# --- security contexts ---------------------------------------------------------------------


def test_security_contexts_default_to_the_images_user() -> None:
    objects = render()
    for spec in (pod_spec(objects), helm_test_pod(objects)["spec"]):
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        for container in spec["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "privileged": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            }


def test_a_uid_from_the_platforms_range_reaches_both_pods() -> None:
    """OpenShift's restricted profile: its uid, no group of the chart's, its own fsGroup."""
    objects = render(
        None,
        f"podSecurityContext.runAsUser={OPENSHIFT_UID}",
        "podSecurityContext.runAsGroup=null",
        "podSecurityContext.fsGroup=null",
        "containerSecurityContext.seLinuxOptions.level=s0:c27\\,c14",
    )
    assert_valid(objects)
    for spec in (pod_spec(objects), helm_test_pod(objects)["spec"]):
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": OPENSHIFT_UID,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        [container] = spec["containers"]
        assert container["securityContext"]["seLinuxOptions"] == {"level": "s0:c27,c14"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


# --- extra volumes and mounts ----------------------------------------------------------------

CA_VOLUME = {"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}
MODEL_VOLUME = {"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}
CA_MOUNT = {"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True}
MODEL_MOUNT = {"name": "model", "mountPath": "/models", "readOnly": True}


@pytest.mark.parametrize("scenario", ["embedded", "qdrant-server"])
def test_extra_volumes_are_mounted_beside_the_charts_own(scenario: str) -> None:
    objects = render(
        scenario,
        set_json("extraVolumes", [CA_VOLUME, MODEL_VOLUME]),
        set_json("extraVolumeMounts", [CA_MOUNT, MODEL_MOUNT]),
    )
    assert_valid(objects)
    own = ["tmp", "data"] if scenario == "embedded" else ["tmp"]
    volumes = pod_spec(objects)["volumes"]
    assert [v["name"] for v in volumes] == [*own, "ca-bundle", "model"]
    assert volumes[-2:] == [CA_VOLUME, MODEL_VOLUME]
    mounts = server_container(objects)["volumeMounts"]
    assert mounts[-2:] == [CA_MOUNT, MODEL_MOUNT]
    assert [m["name"] for m in mounts[:-2]] == own
    # Not the test pod's: it only talks to the Service.
    assert [v["name"] for v in helm_test_pod(objects)["spec"]["volumes"]] == ["tmp"]


def test_extra_volumes_keep_clear_of_the_charts_own() -> None:
    stderr = render_fails(None, set_json("extraVolumes", [{"name": "data", "emptyDir": {}}]))
    assert '"data" is the chart\'s own volume' in stderr
    stderr = render_fails(
        None, set_json("extraVolumeMounts", [{"name": "x", "mountPath": "/tmp/"}])
    )
    assert "/tmp/ is the chart's own mount" in stderr


# --- probes -------------------------------------------------------------------------------------

PROBES = {"startup": "startupProbe", "readiness": "readinessProbe", "liveness": "livenessProbe"}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_each_probe_can_be_switched_off_alone(probe: str) -> None:
    container = server_container(render(None, f"probes.{probe}.enabled=false"))
    present = {field for field in PROBES.values() if field in container}
    assert present == set(PROBES.values()) - {PROBES[probe]}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_each_probe_takes_every_field(probe: str) -> None:
    fields: dict[str, Any] = {
        "initialDelaySeconds": 7,
        "periodSeconds": 11,
        "timeoutSeconds": 4,
        "failureThreshold": 5,
    }
    fields |= {"successThreshold": 2} if probe == "readiness" else {}
    fields |= {} if probe == "readiness" else {"terminationGracePeriodSeconds": 45}
    objects = render(None, *(f"probes.{probe}.{key}={value}" for key, value in fields.items()))
    assert_valid(objects)
    rendered = dict(server_container(objects)[PROBES[probe]])
    path = rendered.pop("httpGet")["path"]
    assert path == ("/v1/health" if probe == "readiness" else "/metrics")
    assert rendered == {"successThreshold": 1} | fields


def test_probe_values_refuse_an_unknown_field() -> None:
    stderr = render_fails(None, "probes.liveness.enable=false")
    assert "additional properties 'enable' not allowed" in stderr


# --- extraEnv ---------------------------------------------------------------------------------


def test_an_extra_env_entry_replaces_the_charts_own() -> None:
    other_key = {"secretKeyRef": {"name": "qdrant-rotated", "key": "key"}}
    objects = render(
        "qdrant-server",
        set_json(
            "extraEnv",
            [
                {"name": "MEMORY_PLUGIN_CPUS", "value": "2"},
                {"name": "QDRANT_API_KEY", "valueFrom": other_key},
                {"name": "MALLOC_ARENA_MAX", "value": "2"},
            ],
        ),
    )
    assert_valid(objects)
    env = env_of(server_container(objects))
    names = [e["name"] for e in env]
    assert names == ["MEMORY_PLUGIN_CPUS", "QDRANT_API_KEY", "MALLOC_ARENA_MAX"]
    assert env[0] == {"name": "MEMORY_PLUGIN_CPUS", "value": "2"}
    assert env[1] == {"name": "QDRANT_API_KEY", "valueFrom": other_key}


def test_extra_env_beside_the_charts_own_keeps_both() -> None:
    env = env_of(
        server_container(render("qdrant-server", "extraEnv[0].name=A,extraEnv[0].value=x"))
    )
    assert [e["name"] for e in env] == ["MEMORY_PLUGIN_CPUS", "QDRANT_API_KEY", "A"]
    assert env[0]["valueFrom"]["resourceFieldRef"]["resource"] == "requests.cpu"


def test_extra_env_may_name_a_variable_once() -> None:
    twice = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    assert "extraEnv names A twice" in render_fails(None, set_json("extraEnv", twice))


# --- the PodDisruptionBudget ----------------------------------------------------------------------


def pdb_spec(*sets: str) -> Manifest:
    objects = render(None, *sets)
    assert_valid(objects)
    spec: Manifest = one(objects, "PodDisruptionBudget")["spec"]
    return spec


def test_pdb_defaults_to_one_unavailable_and_the_clusters_eviction_policy() -> None:
    spec = pdb_spec()
    assert spec["maxUnavailable"] == 1
    assert "minAvailable" not in spec
    assert "unhealthyPodEvictionPolicy" not in spec


@pytest.mark.parametrize("policy", ["IfHealthyBudget", "AlwaysAllow"])
def test_pdb_takes_min_available_and_the_eviction_policy(policy: str) -> None:
    spec = pdb_spec(
        "podDisruptionBudget.maxUnavailable=null",
        "podDisruptionBudget.minAvailable=50%",
        f"podDisruptionBudget.unhealthyPodEvictionPolicy={policy}",
    )
    assert spec["minAvailable"] == "50%"
    assert "maxUnavailable" not in spec
    assert spec["unhealthyPodEvictionPolicy"] == policy


def test_pdb_takes_one_of_max_unavailable_and_min_available() -> None:
    both = render_fails(None, "podDisruptionBudget.minAvailable=1")
    assert "maxUnavailable or minAvailable, not both" in both
    neither = render_fails(None, "podDisruptionBudget.maxUnavailable=null")
    assert "needs maxUnavailable or minAvailable" in neither
    assert "unhealthyPodEvictionPolicy" in render_fails(
        None, "podDisruptionBudget.unhealthyPodEvictionPolicy=Always"
    )


# --- the schema stays strict -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "podSecurityContext.runAsUsr=1",
        "containerSecurityContext.capabilities.remove[0]=ALL",
        "extraVolumes[0].name=x,extraVolumes[0].hostpath.path=/x",
        "extraVolumeMounts[0].name=x,extraVolumeMounts[0].mountpath=/x",
        "podDisruptionBudget.minAvailible=1",
    ],
)
def test_the_new_values_refuse_unknown_keys(bad: str) -> None:
    stderr = render_fails(None, bad)
    assert "additional properties" in stderr, stderr
