"""Token vectors for memories stored without them: the upgrade of an older store.

Computed in the background once the store's vector space is verified, as a tenant of their own
so the platform's requests go first; see docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import dataclass

from adapters.base import VectorBackend
from adapters.parts import TokenIndex
from adapters.values import TokenVectors
from adapters.values import wordpiece_ids
from plugin.embedding.embedding_tokens import Embedding
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work
from plugin.upgrades.upgrade_retries import retried

PAGE = 64
RETRY_S = 2.0
TENANT = "~token-index"  # the fair queues' tenant of the upgrade: one share, never more
log = logging.getLogger(__name__)
Embed = Callable[[str, Work], Awaitable[Embedding]]
Progress = Callable[[int], None]


def _nobody(_: int) -> None:
    """The progress callback when nobody counts."""


@dataclass
class Filled:
    """What a pass of `fill` did: how many memories it gave token vectors, and whether every
    memory it met now has its wordpieces too (the rerank's weights need them all)."""

    indexed: int = 0
    complete: bool = True


async def fill(part: TokenIndex, embed: Embed, progress: Progress = _nobody) -> Filled:
    """Give every memory without token vectors (or without their wordpieces) its own."""
    await part.prepare_tokens()
    work = Work(TENANT, Priority.WRITE)
    filled = Filled()
    cursor: str | None = None
    while True:
        found, cursor = await part.untokenized_memories(cursor, PAGE)
        if found:
            embedded = await asyncio.gather(*(embed(c, work) for _, c in found))
            items: list[tuple[str, TokenVectors]] = [
                (key, tokens)
                for (key, _), embedding in zip(found, embedded, strict=True)
                if (tokens := embedding.tokens) is not None
            ]
            if not items:  # this encoder computes none (a model of another shape)
                return Filled(filled.indexed, complete=False)
            filled.complete &= all(wordpiece_ids(tokens) is not None for _, tokens in items)
            filled.indexed += await part.index_tokens(items)
            progress(len(items))
        if cursor is None:
            return filled


async def maintain_in_background(
    backend: VectorBackend,
    embed: Embed,
    ready: Callable[[], bool],
    progress: Progress = _nobody,
    weighed: threading.Event | None = None,
) -> None:
    """`fill` once `ready` (the store's vector space verified), retried while the store is
    unavailable; never stops the server. Nothing to do where the backend keeps none. Sets
    `weighed` once every memory has its wordpieces: searches then weigh query tokens."""
    part = backend.token_index
    if part is None:
        return
    while not ready():  # noqa: ASYNC110 - set by the fingerprint check, a threading.Event
        await asyncio.sleep(0.5)

    async def filled() -> None:
        started = time.monotonic()
        filled = await fill(part, embed, progress)
        if filled.indexed:
            seconds = round(time.monotonic() - started, 2)
            extra = {"memories": filled.indexed, "seconds": seconds}
            log.info("token vectors filled in", extra=extra)
        if filled.complete and weighed is not None:
            weighed.set()

    await retried(filled, "token vectors not filled in", log, RETRY_S)
