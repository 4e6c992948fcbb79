"""The backends by name (adapters/registry.py): one way to build each, from the settings
(plugin/backends.py) and in an engine worker alike."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from adapters import registry
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import BackendMisconfigured
from adapters.pinecone import PineconeBackend
from adapters.pool.engine_pool import EnginePool
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from plugin.backends import build_backend
from plugin.settings import Settings
from tests.support.records import DIM


@pytest.mark.parametrize("name", sorted(registry.BACKENDS))
def test_every_name_leads_to_a_callable(name: str) -> None:
    module, _, attribute = registry.BACKENDS[name].partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_a_name_builds_its_backend_with_the_options_as_given(tmp_path: Path) -> None:
    options = {"dimension": DIM, "data_dir": str(tmp_path / "data"), "durability": "async"}
    backend = registry.build("qdrant-edge", options)
    assert isinstance(backend, QdrantEdgeBackend)
    assert backend.dimension == DIM


def test_a_module_and_callable_builds_a_backend_of_ones_own(tmp_path: Path) -> None:
    options = {"dimension": DIM, "data_dir": str(tmp_path / "data")}
    backend = registry.build("harness.crashing_store:CrashingStore", options)
    assert type(backend).__name__ == "CrashingStore"
    assert isinstance(backend, QdrantEdgeBackend)


def test_an_unknown_name_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(BackendMisconfigured) as refused:
        registry.build("postgres", {})
    assert str(refused.value) == (
        "no backend is named 'postgres' (known: embedded, qdrant-edge, qdrant,"
        " qdrant-collections, pinecone)"
    )


def test_what_is_built_must_be_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "condition", "adapters.values:StoreCondition")
    with pytest.raises(TypeError) as refused:
        registry.build("condition", {})
    assert str(refused.value) == (
        "adapters.values:StoreCondition built StoreCondition, not a VectorBackend"
    )


@pytest.mark.parametrize(
    ("environ", "kind"),
    [
        ({}, EnginePool),
        ({"QDRANT_URL": "http://qdrant.test:6333"}, QdrantServerBackend),
        (
            {"QDRANT_URL": "http://qdrant.test:6333", "MEMORY_PLUGIN_QDRANT_LAYOUT": "collections"},
            QdrantCollectionsBackend,
        ),
        (
            {
                "MEMORY_PLUGIN_BACKEND": "pinecone",
                "PINECONE_API_KEY": "pc-test",
                "PINECONE_INDEX": "agent-memory",
            },
            PineconeBackend,
        ),
    ],
)
def test_the_settings_choose_a_name_and_its_options(
    tmp_path: Path, environ: dict[str, str], kind: type
) -> None:
    settings = Settings.from_env({"MEMORY_PLUGIN_DATA_DIR": str(tmp_path / "data"), **environ})
    backend = build_backend(settings, DIM, cpus=2)
    assert type(backend) is kind
    assert backend.dimension == DIM
