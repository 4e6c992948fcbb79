"""The aiohttp application: routes, middleware, and resources in `cleanup_ctx`, started in
order and stopped in reverse; the server boots while the backend is down, answering 503."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from aiohttp import web

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from plugin.backends import build_backend
from plugin.core.fingerprint import FingerprintMismatch
from plugin.core.fingerprint import check_at_start
from plugin.core.janitor import run_janitor
from plugin.core.search_mode import choose_ranking
from plugin.core.service import Clock
from plugin.core.service import MemoryService
from plugin.core.service import utc_now
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.encoders import Encoder
from plugin.embedding.encoders import load_encoder
from plugin.http.handlers import routes
from plugin.http.keys import ADMISSION
from plugin.http.keys import BACKEND
from plugin.http.keys import CPUS
from plugin.http.keys import EMBEDDER
from plugin.http.keys import ENCODER
from plugin.http.keys import KEYWORDS
from plugin.http.keys import METRICS
from plugin.http.keys import RANKING
from plugin.http.keys import SERVICE
from plugin.http.keys import SETTINGS
from plugin.http.keys import SIZES
from plugin.http.keys import STOP
from plugin.http.keys import STORE_SIZES
from plugin.http.keys import TICKS
from plugin.http.keys import TOKENS_WEIGHED
from plugin.http.keys import VECTORS_VERIFIED
from plugin.http.middleware import envelope
from plugin.http.middleware import request_context
from plugin.observability.instrumented import instrumented
from plugin.observability.metrics import Metrics
from plugin.observability.store_size_gauges import StoreSizeGauges
from plugin.scheduling.admission import Admission
from plugin.scheduling.admission import ServiceTime
from plugin.scheduling.admission import Shares
from plugin.scheduling.dimmer import RerankDimmer
from plugin.scheduling.thread_priority import at_low_priority
from plugin.settings import Settings
from plugin.sizing import engine_workers_of
from plugin.sizing import plugin_cpus
from plugin.upgrades import place_upgrade
from plugin.upgrades import vector_fill

log = logging.getLogger(__name__)


async def _encoder(app: web.Application) -> AsyncIterator[None]:
    if ENCODER not in app:
        app[ENCODER] = await at_low_priority(load_encoder, app[SETTINGS], app[CPUS])
    yield


async def _embedder(app: web.Application) -> AsyncIterator[None]:
    metrics, settings = app[METRICS], app[SETTINGS]
    service_time = ServiceTime(app[ENCODER].parallelism, app[TICKS])
    admission = app[ADMISSION] = Admission(
        Shares(settings.admission_budget_s, settings.tenant_max_in_flight),
        service_time,
        on_refused=metrics.sharing.observe_refused,
    )

    def observe_batch(texts: int, seconds: float) -> None:
        metrics.observe_embedding(texts, seconds)
        service_time.observe_model(texts, seconds)

    embedder = app[EMBEDDER] = BatchingEmbedder(
        app[ENCODER],
        observer=observe_batch,
        wait_observer=metrics.sharing.observe_wait,
        overdue_s=settings.backend_timeout_s * 2 / 3,
        after_model_s=settings.backend_timeout_s / 6,
        requests_in_flight=lambda: admission.in_flight,
        keep_tokens=app[RANKING].reranks,  # only a rerank reads them
    )
    await embedder.start()
    metrics.sharing.watch(admission, embedder.queued_by_priority)
    yield
    await embedder.close()


async def _backend(app: web.Application) -> AsyncIterator[None]:
    encoder, settings = app[ENCODER], app[SETTINGS]
    if BACKEND not in app:
        dimensions = encoder.dimension, encoder.token_dimension
        app[BACKEND] = build_backend(settings, *dimensions, cpus=app[CPUS])
    backend = app[BACKEND]
    app[SIZES] = {
        "cpus": app[CPUS],
        "embedding_sessions": encoder.parallelism,
        "engine_workers": engine_workers_of(backend),
    }
    await backend.start()
    try:  # vectors of another space are never mixed in (plugin/core/fingerprint.py)
        verified = app[VECTORS_VERIFIED].set
        later = await check_at_start(
            backend, encoder.fingerprint, settings.backend_timeout_s, verified
        )
        app[RANKING] = choose_ranking(settings.search, backend)
    except BaseException:
        await backend.close()
        raise
    if later is not None:  # a mismatch found once the store answers stops the server
        later.add_done_callback(lambda task: _stop_on_mismatch(app, task))
    yield
    if later is not None:
        later.cancel()
        await asyncio.gather(later, return_exceptions=True)
    await backend.close()


def _stop_on_mismatch(app: web.Application, check: asyncio.Task[None]) -> None:
    error = None if check.cancelled() else check.exception()
    if isinstance(error, FingerprintMismatch):
        app[STOP](str(error))


def _service(clock: Clock) -> Callable[[web.Application], AsyncIterator[None]]:
    async def context(app: web.Application) -> AsyncIterator[None]:
        settings, metrics = app[SETTINGS], app[METRICS]
        backend = instrumented(app[BACKEND], metrics.observe_backend)
        ranking = app[RANKING]
        if ranking.dimmed is not None:
            dimmer = RerankDimmer(settings.rerank_queue, app[ADMISSION].queued_ahead, app[TICKS])
            metrics.watch_rerank_share(lambda: dimmer.share)
            ranking = replace(ranking, best_now=dimmer.rerank)
        ranking = replace(ranking, weighs_tokens=app[TOKENS_WEIGHED].is_set)
        app[SERVICE] = MemoryService(
            backend,
            app[EMBEDDER],
            app[KEYWORDS],
            ranking=ranking,
            deadline_s=settings.backend_timeout_s,
            clock=clock,
            vectors_verified=app[VECTORS_VERIFIED].is_set,
            on_reused=metrics.observe_vector_reused,
        )
        metrics.watch_condition(app[SERVICE].condition)
        tasks: list[asyncio.Task[None]] = []

        def start(name: str, work: Coroutine[Any, Any, None]) -> None:
            tasks.append(asyncio.create_task(work, name=name))

        start(
            "janitor", run_janitor(app[SERVICE], settings.janitor_interval_s, metrics.observe_sweep)
        )
        start(  # app[BACKEND], as the fingerprint check: not timed as requests
            "keyword index",
            vector_fill.maintain_in_background(
                app[BACKEND], vector_fill.keywords(app[KEYWORDS]), metrics.observe_keywords_indexed
            ),
        )
        start("write order", place_upgrade.maintain_in_background(app[BACKEND], clock))
        if backend.store_size is not None:
            app[STORE_SIZES] = StoreSizeGauges(backend.store_size, metrics.registry)
            start("store size", app[STORE_SIZES].run())
        if ranking.reranks:  # no other ranking reads token vectors
            start(
                "token index",
                vector_fill.maintain_in_background(
                    app[BACKEND],
                    vector_fill.tokens(app[SERVICE].embedder.embed),
                    metrics.observe_tokens_indexed,
                    ready=app[VECTORS_VERIFIED].is_set,
                    complete=app[TOKENS_WEIGHED],
                ),
            )
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    return context


async def _frozen_heap(app: web.Application) -> AsyncIterator[None]:
    """Leave what start-up built (the model, its sessions, the libraries) out of the
    garbage collector's full passes: with them in the heap a pass stalled the event loop
    for tens of ms, delaying refusals past their 50 ms (benchmarks/README.md, "Fair
    sharing"). No collection first: it would cost each test's app a full pass.
    """
    gc.freeze()
    yield
    gc.unfreeze()  # several apps in one process (tests): let this one's objects go


def create_app(
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    backend: VectorBackend | None = None,
    keywords: KeywordEncoder | None = None,
    clock: Clock = utc_now,
    ticks: Callable[[], float] = time.monotonic,
    cpus: int | None = None,
) -> web.Application:
    """Build the app. Tests pass a loaded `encoder` (loading takes seconds), a `backend`, other
    `keywords`, hand-moved `ticks` (admission's clock), or the `cpus` to size for."""
    app = web.Application(
        client_max_size=settings.max_body_bytes, middlewares=[request_context, envelope]
    )
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    app[TICKS] = ticks
    app[CPUS] = plugin_cpus(settings) if cpus is None else cpus
    app[KEYWORDS] = KeywordEncoder() if keywords is None else keywords
    app[VECTORS_VERIFIED] = threading.Event()  # the store holds the encoder's vector space
    app[TOKENS_WEIGHED] = threading.Event()  # every memory has its wordpieces
    app[STOP] = lambda reason: log.error("should stop: %s", reason)  # `serve` replaces it
    if encoder is not None:
        app[ENCODER] = encoder
    if backend is not None:
        app[BACKEND] = backend
    app.cleanup_ctx.extend([_encoder, _backend, _embedder, _service(clock), _frozen_heap])
    app.add_routes(routes)
    return app
