"""The backends by name, and the one way each is built: `build(name, options)`.

Each name maps to a "module:callable" imported only when asked for, so a deployment loads only
its own backend's SDK (docs/development.md, "Adding a backend").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured

BACKENDS: dict[str, str] = {
    # qdrant-edge on disk, in engine worker processes (a pool of one or more)
    "embedded": "adapters.qdrant.edge.edge_client:embedded_store",
    # qdrant-edge on disk in this process: what one engine worker serves
    "qdrant-edge": "adapters.qdrant.edge.edge_backend:QdrantEdgeBackend",
    # a Qdrant server, every namespace in one shared collection
    "qdrant": "adapters.qdrant.server.tenants:QdrantServerBackend",
    # a Qdrant server, a collection per namespace (the older layout; migrate-layout's source)
    "qdrant-collections": "adapters.qdrant.server.namespace_collections:QdrantCollectionsBackend",
    # an existing Pinecone serverless index
    "pinecone": "adapters.pinecone:PineconeBackend",
}


def build(name: str, options: Mapping[str, Any]) -> VectorBackend:
    """The backend registered as `name`, built with `options` as keyword arguments."""
    try:
        target = BACKENDS[name]
    except KeyError:
        known = ", ".join(BACKENDS)
        raise BackendMisconfigured(f"no backend is named {name!r} (known: {known})") from None
    module, _, attribute = target.partition(":")
    backend = getattr(importlib.import_module(module), attribute)(**options)
    if not isinstance(backend, VectorBackend):
        raise TypeError(f"{target} built {type(backend).__name__}, not a VectorBackend")
    return backend
