"""The Helm chart's backends: secrets from secret refs only, Qdrant, Pinecone, embedded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plugin.settings import Settings
from tests.support.helm import CHART
from tests.support.helm import FULLNAME
from tests.support.helm import NAMESPACE
from tests.support.helm import RELEASE
from tests.support.helm import SCENARIOS
from tests.support.helm import Manifest
from tests.support.helm import config_map
from tests.support.helm import helm
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import render_fails
from tests.support.helm import server_container
from tests.support.helm import values_file

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
    data = config_map(objects)["data"]
    assert not [key for key in data if "KEY" in key or "SECRET" in key]


def env_refs(objects: list[Manifest]) -> dict[str, Manifest]:
    """The container's variables taken from other objects (the pod's own fields aside)."""
    return {
        e["name"]: e["valueFrom"]
        for e in server_container(objects).get("env", [])
        if "resourceFieldRef" not in e["valueFrom"]
    }


def test_qdrant_layout_can_be_collections() -> None:
    data = config_map(render("qdrant-server", "qdrant.layout=collections"))["data"]
    assert Settings.from_env(dict(data)).qdrant_layout == "collections"
    assert "layout" in render_fails("qdrant-server", "qdrant.layout=tenants")


def test_qdrant_server_backend() -> None:
    objects = render("qdrant-server")
    data = config_map(objects)["data"]
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
    assert env_refs(render("qdrant-server", "qdrant.apiKeySecret.name=")) == {}


def test_qdrant_backend_needs_a_url() -> None:
    assert "qdrant.url" in render_fails("qdrant-server", "qdrant.url=")
    assert "qdrant.url" in render_fails(None, "backend=qdrant", "replicaCount=2")


def test_pinecone_backend() -> None:
    objects = render("pinecone")
    data = config_map(objects)["data"]
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
    data = config_map(render("pinecone", "pinecone.index=", f"pinecone.host={host}"))["data"]
    assert data["PINECONE_HOST"] == host
    assert "PINECONE_INDEX" not in data


def test_pinecone_needs_a_secret_and_an_index() -> None:
    assert "pinecone.apiKeySecret.name" in render_fails("pinecone", "pinecone.apiKeySecret.name=")
    assert "pinecone.index or pinecone.host" in render_fails("pinecone", "pinecone.index=")


def test_a_plaintext_key_is_rejected() -> None:
    for key in ("pinecone.apiKey=abc", "qdrant.apiKey=abc"):
        assert "apiKey" in render_fails("pinecone", key)


# --- embedded -------------------------------------------------------------------------


def test_a_bare_install_is_the_embedded_backend() -> None:
    objects = render(None, "image.repository=registry.example.com/memory-plugin-vector")
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert one(objects, "PersistentVolumeClaim")["metadata"]["name"] == f"{FULLNAME}-data"
    data = config_map(objects)["data"]
    assert Settings.from_env(dict(data)).backend == "embedded"
    assert "QDRANT_URL" not in data


@pytest.mark.parametrize(
    ("scenario", "said"),
    [
        (None, ["Backend: embedded", "ci/qdrant-server-values.yaml", "ci/pinecone-values.yaml"]),
        ("qdrant-server", ["Backend: qdrant at http://qdrant:6333", "--set backend=embedded"]),
        ("pinecone", ["Backend: pinecone (index agent-memory)", "--set backend=embedded"]),
    ],
)
def test_the_notes_name_the_backend_and_how_to_change_it(
    scenario: str | None, said: list[str]
) -> None:
    args = ["install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE]
    if scenario is not None:
        args += ["--values", values_file(scenario)]
    result = helm(*args)
    assert result.returncode == 0, result.stderr
    notes = result.stdout.partition("NOTES:")[2]
    for line in said:
        assert line in notes


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
    data = config_map(objects)["data"]
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
