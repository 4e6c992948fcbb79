"""The store's keyword index: which encoder made it, and filling in what is missing.

A memory without a keyword vector gets one from its stored content, in the background at every
start and with no model call; see docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from adapters.base import VectorBackend
from plugin.embedding.bm25 import KeywordEncoder
from plugin.upgrades.upgrade_retries import retried

META_ENCODER = "keyword_encoder"
META_STATE = "keyword_index"
COMPLETE, BUILDING, RESETTING = "complete", "building", "resetting"
PAGE = 256
RETRY_S = 2.0
log = logging.getLogger(__name__)
# Told after every page: how many memories it indexed.
Progress = Callable[[int], None]


def _nobody(_: int) -> None:
    """The progress callback when nobody counts."""


@dataclass(frozen=True, slots=True)
class FillReport:
    indexed: int
    seconds: float


async def prepare(backend: VectorBackend, encoder: KeywordEncoder) -> bool:
    """Record `encoder` with the store, dropping another encoder's vectors; False when the
    backend keeps no keyword vectors (nothing to do). Idempotent; safe to repeat after a crash."""
    index, meta = backend.keyword_index, backend.store_meta
    if index is None or meta is None:
        return False
    facts = await meta.read_store_meta()
    recorded, state = facts.get(META_ENCODER), facts.get(META_STATE)
    if recorded is not None and recorded != encoder.identity:
        log.warning(
            "keyword vectors were made by another encoder: re-indexing the store",
            extra={"recorded": recorded, "configured": encoder.identity},
        )
        await meta.write_store_meta(META_STATE, RESETTING)
        await meta.write_store_meta(META_ENCODER, encoder.identity)
        state = RESETTING
    try:
        await index.prepare_keywords(reset=state == RESETTING)
    except NotImplementedError:  # known only once the store answers (a cosine Pinecone index)
        return False
    if recorded is None:
        await meta.write_store_meta(META_ENCODER, encoder.identity)
    if state != BUILDING:
        await meta.write_store_meta(META_STATE, BUILDING)
    return True


async def fill(
    backend: VectorBackend,
    encoder: KeywordEncoder,
    *,
    page: int = PAGE,
    progress: Progress = _nobody,
) -> FillReport:
    """Give every memory without a keyword vector its own, then record the index complete.

    After a `prepare` that returned True (the backend has both parts)."""
    index, meta = backend.keyword_index, backend.store_meta
    assert index is not None, "fill follows a successful prepare"
    assert meta is not None, "fill follows a successful prepare"
    started = time.monotonic()
    indexed = 0
    cursor: str | None = None
    while True:
        found, cursor = await index.unindexed_memories(cursor, page)
        if found:
            items = [(key, encoder.document(content)) for key, content in found]
            indexed += await index.index_keywords(items)
            progress(len(items))
        if cursor is None:
            break
        await asyncio.sleep(0)  # requests queued meanwhile go first
    await meta.write_store_meta(META_STATE, COMPLETE)
    return FillReport(indexed, time.monotonic() - started)


async def index_store(
    backend: VectorBackend, encoder: KeywordEncoder, progress: Progress = _nobody
) -> FillReport | None:
    """`prepare` then `fill`; None when the backend keeps no keyword vectors."""
    if not await prepare(backend, encoder):
        return None
    report = await fill(backend, encoder, progress=progress)
    if report.indexed:
        log.info(
            "keyword vectors indexed",
            extra={"memories": report.indexed, "seconds": round(report.seconds, 2)},
        )
    return report


async def maintain_in_background(
    backend: VectorBackend, encoder: KeywordEncoder, progress: Progress = _nobody
) -> None:
    """`index_store`, retried while the store is unavailable; never stops the server."""

    async def index() -> None:
        if await index_store(backend, encoder, progress) is None:
            log.info("this backend keeps no keyword vectors: dense search only")

    await retried(index, "keyword index not built", log, RETRY_S)
