"""Which backend the settings ask for: its name in adapters/registry.py, and its plain-value
options (secrets unwrapped here, and nowhere else).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.base import VectorBackend
from adapters.registry import build
from plugin.core.search_mode import may_rerank
from plugin.settings import Settings
from plugin.sizing import plugin_cpus

Options = dict[str, Any]
# (settings, the sentence vectors' size, the token vectors' size, the CPUs it may use)
Choice = Callable[[Settings, int, int, int], tuple[str, Options]]


def _embedded(
    settings: Settings, dimension: int, token_dimension: int, cpus: int
) -> tuple[str, Options]:
    """Qdrant's engine (qdrant-edge) in worker processes, on disk under MEMORY_PLUGIN_DATA_DIR;
    unless set, as many workers as `cpus` asks for where the CPUs are declared (the chart's
    pod, whatever count wrote the store), else the store's own count, or for a new store
    `cpus`'s."""
    from adapters.pool.embedded_store import default_workers
    from adapters.pool.embedded_store import engine_workers

    asked = settings.engine_workers
    if asked is None and settings.cpus is not None:
        asked = default_workers(cpus)
    return "embedded", {
        "dimension": dimension,
        "data_dir": settings.data_dir,
        "workers": engine_workers(settings.data_dir, asked, cpus),
        "durability": settings.durability,
        "write_deadline_s": settings.backend_timeout_s,
        "token_dimension": token_dimension,
    }


def qdrant_options(
    settings: Settings,
    dimension: int,
    *,
    timeout_s: float | None = None,
    tokens: bool | None = None,
    token_dimension: int | None = None,
) -> Options:
    """A Qdrant server at QDRANT_URL, in either layout (the migration builds both); with token
    vectors where searches may rerank, unless `tokens` says otherwise."""
    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return {
        "dimension": dimension,
        "url": settings.qdrant_url,
        "api_key": key,
        "prefix": settings.collection_prefix,
        "timeout_s": settings.backend_timeout_s if timeout_s is None else timeout_s,
        "tokens": may_rerank(settings.search) if tokens is None else tokens,
        "token_dimension": token_dimension,
    }


def _qdrant(
    settings: Settings, dimension: int, token_dimension: int, _: int
) -> tuple[str, Options]:
    """A Qdrant server in the layout MEMORY_PLUGIN_QDRANT_LAYOUT asks for."""
    name = "qdrant-collections" if settings.qdrant_layout == "collections" else "qdrant"
    return name, qdrant_options(settings, dimension, token_dimension=token_dimension)


def _pinecone(settings: Settings, dimension: int, _: int, __: int) -> tuple[str, Options]:
    """An existing Pinecone serverless index; it keeps no token vectors."""
    assert settings.pinecone_api_key is not None  # Settings requires it for this backend
    return "pinecone", {
        "dimension": dimension,
        "api_key": settings.pinecone_api_key.get_secret_value(),
        "index_name": settings.pinecone_index,
        "host": settings.pinecone_host,
        "prefix": settings.collection_prefix,
        "timeout_s": settings.backend_timeout_s,
        "freshness_window_s": settings.freshness_window_s,
        "overlay_max_entries": settings.overlay_max_entries,
        "hybrid": settings.search == "hybrid",
    }


CHOICES: dict[str, Choice] = {
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
    `token_dimension` (None: `dimension`); `cpus`: what the plugin may use (plugin/sizing.py)."""
    cpus = plugin_cpus(settings) if cpus is None else cpus
    choose = CHOICES[settings.backend]
    return build(*choose(settings, dimension, token_dimension or dimension, cpus))
