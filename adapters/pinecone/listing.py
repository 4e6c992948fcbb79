"""Newest-first listing on Pinecone, which has no ordered scan.

Queries narrowed by `created_us`, round by round, until a sample holds the true newest.
See docs/backends.md, "Pinecone" ("Listing without a query").
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable

from adapters.pinecone.vector_metadata import newer_than
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryRecord

MAX_ROUNDS = 6


def _newest_first(memories: list[MemoryRecord]) -> list[MemoryRecord]:
    return sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True)


async def newest_memories(
    scan: Callable[[JsonObject], Awaitable[list[MemoryRecord]]],
    base_filter: JsonObject,
    want: int,
    scan_size: int,
) -> list[MemoryRecord]:
    """The `want` newest memories matching `base_filter`, newest first."""
    found = _newest_first(await scan(base_filter))
    cutoff: int | None = None
    for _ in range(MAX_ROUNDS):
        if len(found) < scan_size:
            break
        next_cutoff = to_micros(found[want - 1].created_at)
        if next_cutoff == cutoff:
            break
        cutoff = next_cutoff
        found = _newest_first(await scan(newer_than(base_filter, cutoff)))
    return found[:want]
