"""docker-compose.yml, checked without a Docker engine.

`docker compose config` runs only where the compose plugin is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.metadata import version
from typing import Any

import pytest
import yaml

from plugin.settings import Settings
from tests.support.container import COMPOSE
from tests.support.container import DOCKERFILE
from tests.support.container import ROOT
from tests.support.container import UID
from tests.support.container import env_of
from tests.support.container import parse_dockerfile
from tests.support.container import stage_named


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def test_compose_has_the_plugin_and_a_pinned_qdrant(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"qdrant", "plugin"}
    image = compose["services"]["qdrant"]["image"]
    match = re.fullmatch(r"qdrant/qdrant:v(\d+)\.(\d+)\.(\d+)", image)
    assert match, image
    server = (int(match.group(1)), int(match.group(2)))
    # Qdrant's rule: client and server within one minor version of each other.
    client = tuple(int(part) for part in version("qdrant-client").split(".")[:2])
    assert server[0] == client[0]
    assert abs(server[1] - client[1]) <= 1, f"server {image} vs qdrant-client {client}"
    # Collection metadata (the namespace record) needs Qdrant 1.16 or later.
    assert server >= (1, 16)


def test_compose_runs_the_qdrant_server_the_readme_names(compose: dict[str, Any]) -> None:
    """The image cannot be pulled on the build machine: the tag is checked instead."""
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"qdrant/qdrant:v(\d+\.\d+\.\d+)", readme))
    named |= set(re.findall(r"Qdrant\s+server\s+\((\d+\.\d+\.\d+)\)", readme))
    assert named, "README.md names no Qdrant server version for docker compose"
    assert {f"qdrant/qdrant:v{v}" for v in named} == {compose["services"]["qdrant"]["image"]}


def test_compose_keeps_qdrant_data_in_a_named_volume(compose: dict[str, Any]) -> None:
    volumes = compose["services"]["qdrant"]["volumes"]
    assert volumes == ["qdrant-storage:/qdrant/storage"]
    assert "qdrant-storage" in compose["volumes"]


def test_compose_plugin_talks_to_qdrant_when_it_is_healthy(compose: dict[str, Any]) -> None:
    plugin = compose["services"]["plugin"]
    assert plugin["build"] == "."
    assert plugin["environment"]["QDRANT_URL"] == "http://qdrant:6333"
    assert plugin["depends_on"] == {"qdrant": {"condition": "service_healthy"}}
    image_env = env_of(stage_named(parse_dockerfile(DOCKERFILE.read_text()), "runtime"))
    settings = Settings.from_env(image_env | plugin["environment"])
    assert settings.qdrant_url == "http://qdrant:6333"


def test_compose_services_have_healthchecks(compose: dict[str, Any]) -> None:
    qdrant = compose["services"]["qdrant"]["healthcheck"]["test"]
    # No curl or wget in the qdrant image: bash's /dev/tcp asks /readyz.
    assert qdrant[:3] == ["CMD", "bash", "-c"]
    assert "/dev/tcp/127.0.0.1/6333" in qdrant[3]
    assert "/readyz" in qdrant[3]
    assert "$$status" in qdrant[3]  # a literal $ for bash, not compose interpolation
    plugin = compose["services"]["plugin"]["healthcheck"]
    assert "/v1/health" in " ".join(plugin["test"])
    assert plugin["start_period"] == "60s"


def test_compose_publishes_on_loopback_only(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_compose_plugin_is_locked_down(compose: dict[str, Any]) -> None:
    plugin = compose["services"]["plugin"]
    assert plugin["user"] == f"{UID}:{UID}"
    assert plugin["read_only"] is True
    assert plugin["tmpfs"] == ["/tmp"]
    assert plugin["cap_drop"] == ["ALL"]
    assert plugin["security_opt"] == ["no-new-privileges:true"]


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client: the compose file is checked structurally above")
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip(
            "the docker compose plugin is not installed (docker client only here): "
            "the compose file is checked structurally above"
        )
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
