"""Newest-first listing on Pinecone, which has no ordered scan.

A query returns at most `scan` (1000) matches with metadata, in similarity
order, not time order. So:
1. Query everything the filter admits. Fewer than `scan` matches means the
   whole set came back: sort it by `created_at` and stop (one query; every
   namespace under 1000 live memories per pin side ends here).
2. Otherwise the answer was a sample. Its `want`-th newest memory has a
   creation time `cutoff` such that at least `want` memories are at least
   that new, so the true newest `want` all lie in `created_us >= cutoff`.
   Query that window and repeat: each round keeps about want/scan of the
   previous window (a tenth for a listing of 100).
3. After `MAX_ROUNDS` rounds, or when the cutoff stops moving (more than
   `scan` memories share one microsecond), return the newest of the last
   sample: the only case where the listing can miss a newer memory.

Cost: one query per round, each counted by Pinecone in read units that grow
with the namespace's size.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from adapters.pinecone.vector_metadata import newer_than
from adapters.times import to_micros
from adapters.values import JsonObject, MemoryRecord

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
