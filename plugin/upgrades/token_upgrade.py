"""Token vectors for memories stored without them: the upgrade of an older store.

Some memories carry no token vectors (an older store's, an import's, a layout migration's,
a re-commit's that reused its stored sentence vector). Once the fingerprint check has verified
the store's vector space, they are given theirs from their stored content, in the background:
a `PAGE` at a time through the shared embedder, as writes of a tenant of their own (`TENANT`),
so the platform's searches and commits go first. Sentence vector and payload stay as they are;
until then a search ranks such a memory by its fused score alone (MaxSim counts 0). The progress
is the stored vectors themselves, so it survives `kill -9`. Each costs a model call, so only the
store's own encoder makes them.
See docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from collections.abc import Callable

from adapters.base import VectorBackend
from adapters.parts import TokenIndex
from adapters.values import TokenVectors
from plugin.embedding.embedder import clip_for_model
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


async def fill(part: TokenIndex, embed: Embed, progress: Progress = _nobody) -> int:
    """Give every memory without token vectors its own; how many were given them."""
    await part.prepare_tokens()
    work = Work(TENANT, Priority.WRITE)
    indexed = 0
    cursor: str | None = None
    while True:
        found, cursor = await part.untokenized_memories(cursor, PAGE)
        if found:
            embedded = await asyncio.gather(*(embed(clip_for_model(c), work) for _, c in found))
            items: list[tuple[str, TokenVectors]] = [
                (key, tokens)
                for (key, _), embedding in zip(found, embedded, strict=True)
                if (tokens := embedding.tokens) is not None
            ]
            if not items:  # this encoder computes none (a model of another shape)
                return indexed
            indexed += await part.index_tokens(items)
            progress(len(items))
        if cursor is None:
            return indexed


async def maintain_in_background(
    backend: VectorBackend,
    embed: Embed,
    ready: Callable[[], bool],
    progress: Progress = _nobody,
) -> None:
    """`fill` once `ready` (the store's vector space verified), retried while the store is
    unavailable; never stops the server. Nothing to do where the backend keeps none."""
    part = backend.token_index
    if part is None:
        return
    while not ready():  # noqa: ASYNC110 - set by the fingerprint check, a threading.Event
        await asyncio.sleep(0.5)

    async def filled() -> None:
        started = time.monotonic()
        if indexed := await fill(part, embed, progress):
            seconds = round(time.monotonic() - started, 2)
            log.info("token vectors filled in", extra={"memories": indexed, "seconds": seconds})

    await retried(filled, "token vectors not filled in", log, RETRY_S)
