"""Which backend the settings ask for: a small registry, one factory per backend.

Imports are deferred so that a deployment loads only its own backend's SDK.
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.base import VectorBackend
from plugin.settings import Settings

BackendFactory = Callable[[Settings, int], VectorBackend]


def _embedded(settings: Settings, dimension: int) -> VectorBackend:
    """Qdrant's engine in-process (qdrant-edge), on disk under MEMORY_PLUGIN_DATA_DIR."""
    from adapters.qdrant.edge import QdrantEdgeBackend

    return QdrantEdgeBackend(dimension, settings.data_dir, prefix=settings.collection_prefix)


def qdrant_server(settings: Settings, dimension: int, layout: str | None = None) -> VectorBackend:
    """A Qdrant server at QDRANT_URL, in the layout asked for (default: the setting)."""
    from adapters.qdrant.server import QdrantServerBackend
    from adapters.qdrant.server_collections import QdrantCollectionsBackend

    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    chosen: type[QdrantServerBackend] | type[QdrantCollectionsBackend] = QdrantServerBackend
    if (layout or settings.qdrant_layout) == "collections":
        chosen = QdrantCollectionsBackend
    return chosen(
        dimension,
        url=settings.qdrant_url,
        api_key=key,
        prefix=settings.collection_prefix,
        timeout_s=settings.backend_timeout_s,
    )


def _qdrant(settings: Settings, dimension: int) -> VectorBackend:
    return qdrant_server(settings, dimension)


def _pinecone(settings: Settings, dimension: int) -> VectorBackend:
    """An existing Pinecone serverless index (settings checked at start-up)."""
    from adapters.pinecone import PineconeBackend

    assert settings.pinecone_api_key is not None  # Settings requires it for this backend
    return PineconeBackend(
        dimension,
        api_key=settings.pinecone_api_key.get_secret_value(),
        index_name=settings.pinecone_index,
        host=settings.pinecone_host,
        prefix=settings.collection_prefix,
        timeout_s=settings.backend_timeout_s,
        freshness_window_s=settings.freshness_window_s,
        overlay_max_entries=settings.overlay_max_entries,
    )


BACKENDS: dict[str, BackendFactory] = {
    "embedded": _embedded,
    "qdrant": _qdrant,
    "pinecone": _pinecone,
}


def build_backend(settings: Settings, dimension: int) -> VectorBackend:
    return BACKENDS[settings.backend](settings, dimension)
