"""Every setting the plugin reads can be set through the chart, and the docs say how.

The settings module (plugin/settings.py) is compared with what the chart renders
over its scenarios: a variable no rendering sets fails here, as does a row of
docs/settings.md that says the chart leaves it out. `extraEnv` carries what the
chart does not model, with a schema as strict as the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plugin.settings import Settings
from tests.support.helm import SCENARIOS
from tests.support.helm import Manifest
from tests.support.helm import config_map
from tests.support.helm import render
from tests.support.helm import render_fails
from tests.support.helm import server_container

SETTINGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
ALIASES = {field.alias for field in Settings.model_fields.values() if field.alias}
# Renderings that together set every variable: each scenario, and what one file cannot
# hold at once (an index and a host are alternatives).
RENDERINGS: list[tuple[str | None, tuple[str, ...]]] = [
    (None, ()),
    *((scenario, ()) for scenario in SCENARIOS),
    ("pinecone", ("pinecone.host=https://agent-memory-abc.svc.aped-4627-b74a.pinecone.io",)),
    (None, ("config.engineWorkers=2",)),  # unset by default: from the pod's CPU request
]


def variables(objects: list[Manifest]) -> set[str]:
    env = server_container(objects).get("env", [])
    return set(config_map(objects)["data"]) | {e["name"] for e in env}


def documented() -> dict[str, str]:
    """docs/settings.md's variable rows: variable to its "Helm value" cell."""
    rows = {}
    for line in SETTINGS_DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0] if len(cells) == 4 else ""):
            rows[name] = cells[2]
    return rows


def test_every_setting_is_rendered_by_some_values_of_the_chart() -> None:
    rendered: set[str] = set()
    for scenario, sets in RENDERINGS:
        rendered |= variables(render(scenario, *sets))
    assert ALIASES - rendered == set()


def test_every_setting_is_documented_with_its_helm_value() -> None:
    rows = documented()
    assert ALIASES - set(rows) == set()
    unreachable = {name: rows[name] for name in ALIASES if "not set" in rows[name]}
    assert unreachable == {}


def test_extra_env_reaches_the_container_after_the_secrets() -> None:
    assert "extraEnv" in render_fails("qdrant-server", "extraEnv[0].name=X")  # value or valueFrom
    objects = render(
        "qdrant-server",
        "extraEnv[0].name=MEMORY_PLUGIN_LOG_LEVEL",
        "extraEnv[0].value=DEBUG",
    )
    env = server_container(objects)["env"]
    names = ["MEMORY_PLUGIN_CPUS", "QDRANT_API_KEY", "MEMORY_PLUGIN_LOG_LEVEL"]
    assert [e["name"] for e in env] == names
    assert env[2] == {"name": "MEMORY_PLUGIN_LOG_LEVEL", "value": "DEBUG"}


@pytest.mark.parametrize(
    "typo",
    [
        "extraEnv[0].nmae=X",
        "extraEnv[0].name=1X",
        "config.embeddingBackend=tensorflow",
        "config.maxConnections=0",
        "config.headerTimeoutSeconds=0",
        "config.keepAliveTimeoutSeconds=30",
    ],
)
def test_the_schema_stays_strict(typo: str) -> None:
    render_fails(None, typo)


def test_the_chart_values_reach_the_settings() -> None:
    data = dict(config_map(render(None, "config.embeddingBackend=onnx-int8"))["data"])
    data.pop("MEMORY_PLUGIN_EMBEDDING_MODEL", None)
    settings = Settings.from_env(data)
    assert settings.embedding_backend == "onnx-int8"
    assert (settings.header_timeout_s, settings.body_timeout_s) == (5, 10)
    assert (settings.keepalive_timeout_s, settings.max_connections) == (120, 1000)
    assert settings.onnx_dir is None
    env = variables(render("all-optional"))
    assert {"MEMORY_PLUGIN_ONNX_DIR", "MALLOC_ARENA_MAX", "POD_NAME"} <= env
