"""Which backend the settings ask for: a small registry, one factory per backend."""

from __future__ import annotations

from collections.abc import Callable

from adapters.base import VectorBackend
from plugin.settings import Settings

BackendFactory = Callable[[Settings, int], VectorBackend]


def _qdrant(settings: Settings, dimension: int) -> VectorBackend:
    """A Qdrant server when QDRANT_URL is set, else the embedded engine on disk."""
    if settings.qdrant_url:
        from adapters.qdrant_server import QdrantServerBackend

        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantServerBackend(
            dimension,
            url=settings.qdrant_url,
            api_key=key,
            prefix=settings.collection_prefix,
            timeout_s=settings.backend_timeout_s,
        )
    from adapters.qdrant_edge import QdrantEdgeBackend

    return QdrantEdgeBackend(dimension, settings.data_dir, prefix=settings.collection_prefix)


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


BACKENDS: dict[str, BackendFactory] = {"qdrant": _qdrant, "pinecone": _pinecone}


def build_backend(settings: Settings, dimension: int) -> VectorBackend:
    return BACKENDS[settings.backend](settings, dimension)
