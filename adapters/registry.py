"""The backends by name, each a "module:callable" imported only when asked for, so a
deployment loads only its own backend's SDK (docs/development.md, "Adding a backend")."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured

BACKENDS: dict[str, str] = {
    # qdrant-edge on disk, in engine worker processes (a pool of one or more)
    "embedded": "adapters.pool.embedded_store:embedded_store",
    # qdrant-edge on disk in this process: what one engine worker serves
    "qdrant-edge": "adapters.engine.edge_backend:QdrantEdgeBackend",
    # a Qdrant server, every namespace in one shared collection
    "qdrant": "adapters.qdrant.server.tenants:QdrantServerBackend",
    # a Qdrant server, a collection per namespace (the older layout; migrate-layout's source)
    "qdrant-collections": "adapters.qdrant.server.namespace_collections:QdrantCollectionsBackend",
    # an existing Pinecone serverless index
    "pinecone": "adapters.pinecone:PineconeBackend",
}


def target_of(name: str) -> str:
    """The `module:callable` that builds the backend registered as `name`, or `name` itself
    where it is one (a test's fault hook, harness/crashing_store.py)."""
    target = name if ":" in name else BACKENDS.get(name)
    if target is None:
        known = ", ".join(BACKENDS)
        raise BackendMisconfigured(f"no backend is named {name!r} (known: {known})")
    return target


def load(name: str) -> Callable[..., VectorBackend]:
    """What builds the backend `name` (see `target_of`), its module imported."""
    module, _, attribute = target_of(name).partition(":")
    factory: Callable[..., VectorBackend] = getattr(importlib.import_module(module), attribute)
    return factory


def build(name: str, options: Mapping[str, Any]) -> VectorBackend:
    """The backend `name` (see `target_of`), built with `options` as keyword arguments."""
    backend = load(name)(**options)
    if not isinstance(backend, VectorBackend):
        raise TypeError(f"{target_of(name)} built {type(backend).__name__}, not a VectorBackend")
    return backend
