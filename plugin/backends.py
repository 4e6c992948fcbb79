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


BACKENDS: dict[str, BackendFactory] = {"qdrant": _qdrant}


def build_backend(settings: Settings, dimension: int) -> VectorBackend:
    return BACKENDS[settings.backend](settings, dimension)
