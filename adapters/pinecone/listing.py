"""Newest-first listing on Pinecone, which has no ordered scan.

A query returns at most `scan_size` matches (with metadata), in similarity order. So:
1. Query everything the filter admits. Fewer than `scan_size` matches is the whole set: sort
   it by `created_at` and stop.
2. Otherwise the answer was a sample. At least `want` memories are as new as its `want`-th
   newest (created at `cutoff`), so the true newest `want` all lie in `created_us >= cutoff`:
   query that window and repeat.
3. After `MAX_ROUNDS` rounds, or when the cutoff stops moving (more than `scan_size` memories
   share one microsecond), return the newest of the last sample: the only case where the
   listing can miss a newer memory.
Each round is one query, in Pinecone read units that grow with the namespace's size.
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
