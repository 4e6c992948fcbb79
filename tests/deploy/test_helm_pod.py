"""The Helm chart's server pod: probes, command, lock-down, resources and the CPUs it sizes
itself for, config, and `helm test`.

Helm and the rendering: tests/support/helm.py (without helm these tests skip, except under CI).
"""

from __future__ import annotations

import pytest
from aiohttp import web

from plugin.settings import Settings
from tests.support.helm import CHART
from tests.support.helm import FULLNAME
from tests.support.helm import NAMESPACE
from tests.support.helm import RELEASE
from tests.support.helm import RUNTIME_ENV
from tests.support.helm import SCENARIOS
from tests.support.helm import Manifest
from tests.support.helm import chart_values
from tests.support.helm import config_map
from tests.support.helm import helm
from tests.support.helm import helm_test_pod
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import server_container

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
    data = config_map(objects)["data"]
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
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "3Gi"}
    assert container["resources"]["limits"] == {"memory": "3Gi"}
    assert pod["terminationGracePeriodSeconds"] == 30
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    # preStop sleep + the server's 10 s drain fits in the grace period.
    assert int(sleep[1]) + 10 <= pod["terminationGracePeriodSeconds"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_plugin_sizes_itself_for_the_pods_cpu_request(scenario: str) -> None:
    """Its sessions and engine workers, from the request, not from the node's cores."""
    container = server_container(render(scenario))
    assert container["name"] == "plugin"
    assert container["env"][0] == {
        "name": "MEMORY_PLUGIN_CPUS",
        "valueFrom": {
            "resourceFieldRef": {
                "containerName": "plugin",
                "resource": "requests.cpu",
                "divisor": "1",
            }
        },
    }


def test_without_a_cpu_request_the_plugin_counts_the_cpus_it_may_use() -> None:
    container = server_container(render(None, "resources.requests.cpu=null"))
    assert "MEMORY_PLUGIN_CPUS" not in {e["name"] for e in container.get("env", [])}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_configmap_is_exactly_what_the_plugin_reads(scenario: str) -> None:
    """Every key is a setting the plugin knows, and together they validate."""
    objects = render(scenario)
    data = dict(config_map(objects)["data"])
    assert {k: data.pop(k) for k in sorted(RUNTIME_ENV)} == {
        "HF_HUB_OFFLINE": "1",
        "HOME": "/tmp",
        "OMP_NUM_THREADS": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    known = {field.alias for field in Settings.model_fields.values()}
    assert set(data) <= known
    # A path inside the image, so not checked here; absent when empty.
    model = data.pop("MEMORY_PLUGIN_EMBEDDING_MODEL", "")
    assert model == chart_values(scenario)["config"]["embeddingModel"]
    secrets = {
        e["name"]: "from-a-secret"
        for e in server_container(objects).get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    settings = Settings.from_env(data | secrets)
    config = chart_values(scenario)["config"]
    assert settings.listen == ("0.0.0.0", 9100)
    assert settings.collection_prefix == config["collectionPrefix"]
    assert settings.embedding_sessions == config["embeddingSessions"]
    assert settings.admission_budget_s == config["admissionBudgetSeconds"]
    assert settings.tenant_max_in_flight == config.get("tenantMaxInFlight")
    assert settings.search == (config["search"] or None)
    assert settings.rerank_queue == config["rerankQueue"] == Settings().rerank_queue
    embedded = chart_values(scenario).get("backend", "embedded") == "embedded"
    assert ("MEMORY_PLUGIN_DURABILITY" in data) == embedded
    assert settings.durability == config["durability"]
    assert settings.engine_workers == (config["engineWorkers"] if embedded else None)


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
