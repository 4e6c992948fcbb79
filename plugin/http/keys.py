"""Typed application keys: what the app holds, by name and type."""

from __future__ import annotations

import threading
from collections.abc import Callable

from aiohttp import web

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from plugin.core.search_mode import Ranking
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.encoders import Encoder
from plugin.observability.metrics import Metrics
from plugin.observability.store_size_gauges import StoreSizeGauges
from plugin.scheduling.admission import Admission
from plugin.settings import Settings

SETTINGS = web.AppKey("settings", Settings)
ENCODER = web.AppKey("encoder", Encoder)
EMBEDDER = web.AppKey("embedder", BatchingEmbedder)
KEYWORDS = web.AppKey("keywords", KeywordEncoder)
BACKEND = web.AppKey("backend", VectorBackend)
RANKING = web.AppKey("ranking", Ranking)
# Set once the store's embedding fingerprint is known to be the encoder's space.
VECTORS_VERIFIED = web.AppKey("vectors_verified", threading.Event)
# Set once every stored memory has its wordpieces: a rerank then weighs query tokens.
TOKENS_WEIGHED = web.AppKey("tokens_weighed", threading.Event)
SERVICE = web.AppKey("service", MemoryService)
METRICS = web.AppKey("metrics", Metrics)
# The store's size gauges, where the backend has the part (tests refresh them at once).
STORE_SIZES = web.AppKey("store_sizes", StoreSizeGauges)
# Who may start a request now: each namespace's share of the wait the queue makes.
ADMISSION = web.AppKey("admission", Admission)
# Monotonic seconds, as admission measures the plugin's busy time (tests move them).
TICKS: web.AppKey[Callable[[], float]] = web.AppKey("ticks")
# Asks whoever runs the app to stop it, saying why (`serve`; `create_app`'s default logs).
STOP: web.AppKey[Callable[[str], None]] = web.AppKey("stop")
# The CPUs the plugin may use (plugin/sizing.py), and what start-up sized from them.
CPUS = web.AppKey("cpus", int)
SIZES: web.AppKey[dict[str, int | None]] = web.AppKey("sizes")
