"""Vectors for memories stored without them, filled in place in the background, one kind at a time.

Keyword vectors come from the stored content and the BM25 encoder, with no model call, at every
start; the encoder is recorded with the store, and another one's vectors are dropped first. Token
vectors come from the model, once the store's vector space is verified, as a tenant of their own so
the platform's requests go first. See docs/backends.md, "Hybrid search" and "Reranking by token
vectors".
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.parts import VectorFill
from adapters.values import FillVector
from adapters.values import SparseVector
from adapters.values import VectorKind
from adapters.values import wordpiece_ids
from plugin.embedding.embedding_tokens import Embedding
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work
from plugin.upgrades import retried

# The store's facts about its keyword vectors: the encoder that made them, the fill's state.
META_ENCODER = "keyword_encoder"
META_STATE = "keyword_index"
COMPLETE, BUILDING, RESETTING = "complete", "building", "resetting"
RETRY_S = 2.0
TENANT = "~token-index"  # the fair queues' tenant of the token fill: one share, never more
log = logging.getLogger(__name__)
Embed = Callable[[str, Work], Awaitable[Embedding]]
# Told after every page: how many memories it filled.
Progress = Callable[[int], None]


def _nobody(_: int) -> None:
    """The progress callback when nobody counts."""


@dataclass(frozen=True, slots=True)
class Maker:
    """How the vectors of one kind are made from stored contents: `vectors`, one per content
    (None where it makes none); `identity`, where given, recorded with the store
    (`META_ENCODER`): vectors another one made are dropped first."""

    kind: VectorKind
    vectors: Callable[[Sequence[str]], Awaitable[Sequence[FillVector | None]]]
    page: int
    identity: str | None = None


def keywords(encoder: KeywordEncoder, page: int = 256) -> Maker:
    """The encoder's keyword vectors, with no model call."""

    async def vectors(contents: Sequence[str]) -> list[SparseVector]:
        return [encoder.document(content) for content in contents]

    return Maker(VectorKind.KEYWORDS, vectors, page, encoder.identity)


def tokens(embed: Embed, page: int = 64) -> Maker:
    """The model's token vectors, asked for a page's contents at once."""
    work = Work(TENANT, Priority.WRITE)

    async def vectors(contents: Sequence[str]) -> list[FillVector | None]:
        embedded = await asyncio.gather(*(embed(content, work) for content in contents))
        return [embedding.tokens for embedding in embedded]

    return Maker(VectorKind.TOKENS, vectors, page)


@dataclass
class Filled:
    """What a pass of `fill_store` did: how many memories it gave vectors, and whether every
    memory it met has all of them now (token vectors with their wordpieces' ids)."""

    indexed: int = 0
    complete: bool = True


async def prepare(backend: VectorBackend, maker: Maker) -> VectorFill | None:
    """Make the store ready for `maker`'s vectors; its part, or None when the backend keeps
    none of them (nothing to do). Idempotent; safe to repeat after a crash."""
    part, meta = backend.vector_fill, backend.store_meta
    if part is None or (maker.identity is not None and meta is None):
        return None
    recorded = state = None
    if meta is not None and maker.identity is not None:
        facts = await meta.read_store_meta()
        recorded, state = facts.get(META_ENCODER), facts.get(META_STATE)
        if recorded is not None and recorded != maker.identity:
            log.warning(
                "keyword vectors were made by another encoder: re-indexing the store",
                extra={"recorded": recorded, "configured": maker.identity},
            )
            await meta.write_store_meta(META_STATE, RESETTING)
            await meta.write_store_meta(META_ENCODER, maker.identity)
            state = RESETTING
    try:
        await part.prepare(maker.kind, reset=state == RESETTING)
    except NotImplementedError:  # known only once the store answers (Pinecone)
        return None
    if meta is not None and maker.identity is not None:
        if recorded is None:
            await meta.write_store_meta(META_ENCODER, maker.identity)
        if state != BUILDING:
            await meta.write_store_meta(META_STATE, BUILDING)
    return part


async def fill_store(
    backend: VectorBackend, maker: Maker, progress: Progress = _nobody
) -> Filled | None:
    """`prepare`, then give every memory without `maker`'s vectors its own and record the
    fill complete where the maker has an identity; None when the backend keeps none."""
    part = await prepare(backend, maker)
    if part is None:
        return None
    started, filled = time.monotonic(), Filled()
    cursor: str | None = None
    while True:
        found, cursor = await part.missing(maker.kind, cursor, maker.page)
        if found:
            made = await maker.vectors([content for _, content in found])
            items = [(key, v) for (key, _), v in zip(found, made, strict=True) if v is not None]
            if not items:  # this encoder makes none (a model of another shape)
                return Filled(filled.indexed, complete=False)
            # token vectors without their wordpieces' ids leave the rerank's weights unknown
            filled.complete &= all(
                isinstance(v, SparseVector) or wordpiece_ids(v) is not None for _, v in items
            )
            filled.indexed += await part.fill(maker.kind, items)
            progress(len(items))
        if cursor is None:
            break
        await asyncio.sleep(0)  # requests queued meanwhile go first
    if backend.store_meta is not None and maker.identity is not None:
        await backend.store_meta.write_store_meta(META_STATE, COMPLETE)
    if filled.indexed:
        seconds = round(time.monotonic() - started, 2)
        extra = {"kind": maker.kind.value, "memories": filled.indexed, "seconds": seconds}
        log.info("vectors filled in", extra=extra)
    return filled


async def maintain_in_background(
    backend: VectorBackend,
    maker: Maker,
    progress: Progress = _nobody,
    *,
    ready: Callable[[], bool] = lambda: True,
    complete: threading.Event | None = None,
) -> None:
    """`fill_store` once `ready` (token vectors: the store's vector space verified), retried
    while the store is unavailable; sets `complete` once every memory has all its vectors."""
    if backend.vector_fill is None:
        return
    while not ready():  # noqa: ASYNC110 - set by the fingerprint check, a threading.Event
        await asyncio.sleep(0.5)

    async def run() -> None:
        filled = await fill_store(backend, maker, progress)
        if filled is None:
            log.info("this backend keeps no vectors of kind %s", maker.kind.value)
        elif filled.complete and complete is not None:
            complete.set()

    await retried(run, f"vectors of kind {maker.kind.value} not filled in", log, RETRY_S)
