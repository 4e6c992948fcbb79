"""Which backend the settings ask for: a small registry, one factory per backend.

Imports are deferred so that a deployment loads only its own backend's SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import TypeVar

from adapters.base import VectorBackend
from plugin.settings import Settings
from plugin.sizing import plugin_cpus

if TYPE_CHECKING:  # the SDK is imported only by a deployment that uses it
    from adapters.qdrant.server.server_layouts import QdrantServerLayout

# (settings, the sentence vectors' size, the token vectors' size, the CPUs it may use)
BackendFactory = Callable[[Settings, int, int, int], VectorBackend]
ServerBackend = TypeVar("ServerBackend", bound="QdrantServerLayout")


def _embedded(settings: Settings, dimension: int, token_dimension: int, cpus: int) -> VectorBackend:
    """Qdrant's engine (qdrant-edge) in worker processes, on disk under MEMORY_PLUGIN_DATA_DIR.
    The worker count, unless set: from `cpus` where the CPUs are declared (the chart's pod
    runs the count its CPU request asks for, whatever count wrote the store); else the
    store's own, or for a new store from `cpus`."""
    from adapters.qdrant.edge.edge_client import default_workers
    from adapters.qdrant.edge.edge_client import embedded_store
    from adapters.qdrant.edge.edge_client import engine_workers

    asked = settings.engine_workers
    if asked is None and settings.cpus is not None:
        asked = default_workers(cpus)
    workers = engine_workers(settings.data_dir, asked, cpus)
    return embedded_store(
        dimension,
        settings.data_dir,
        workers,
        durability=settings.durability,
        write_deadline_s=settings.backend_timeout_s,
        token_dimension=token_dimension,
    )


def qdrant_server(
    settings: Settings,
    dimension: int,
    layout: type[ServerBackend],
    *,
    timeout_s: float | None = None,
    tokens: bool | None = None,
    token_dimension: int | None = None,
) -> ServerBackend:
    """A Qdrant server at QDRANT_URL in `layout` (the migration builds both layouts). Where
    searches may rerank (the default, or `rerank`; unless `tokens` says otherwise) an older
    store gains token vectors in place (adapters/qdrant/server/token_vectors.py)."""
    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return layout(
        dimension,
        url=settings.qdrant_url,
        api_key=key,
        prefix=settings.collection_prefix,
        timeout_s=settings.backend_timeout_s if timeout_s is None else timeout_s,
        tokens=settings.search in (None, "rerank") if tokens is None else tokens,
        token_dimension=token_dimension,
    )


def _qdrant(settings: Settings, dimension: int, token_dimension: int, _: int) -> VectorBackend:
    """A Qdrant server in the layout MEMORY_PLUGIN_QDRANT_LAYOUT asks for."""
    from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
    from adapters.qdrant.server.tenants import QdrantServerBackend

    if settings.qdrant_layout == "collections":
        layout: type[QdrantServerLayout] = QdrantCollectionsBackend
    else:
        layout = QdrantServerBackend
    return qdrant_server(settings, dimension, layout, token_dimension=token_dimension)


def _pinecone(settings: Settings, dimension: int, _: int, __: int) -> VectorBackend:
    """An existing Pinecone serverless index (settings checked at start-up); it keeps no
    token vectors."""
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
        hybrid=settings.search == "hybrid",
    )


BACKENDS: dict[str, BackendFactory] = {
    "embedded": _embedded,
    "qdrant": _qdrant,
    "pinecone": _pinecone,
}


def build_backend(
    settings: Settings,
    dimension: int,
    token_dimension: int | None = None,
    *,
    cpus: int | None = None,
) -> VectorBackend:
    """The backend the settings ask for, for vectors of `dimension` and token vectors of
    `token_dimension` (the encoder's; None: `dimension`); `cpus`: what the plugin may use
    (plugin/sizing.py)."""
    cpus = plugin_cpus(settings) if cpus is None else cpus
    return BACKENDS[settings.backend](settings, dimension, token_dimension or dimension, cpus)
