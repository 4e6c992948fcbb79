"""What the Pinecone adapter's freshness overlay and listing cost, in figures.

Run: `python -m benchmarks.pinecone_overlay`. Prints:
- overlay memory for a full overlay (default 5000 entries), 384-dim vectors,
  200-character contents (tracemalloc);
- the time to merge the overlay into one query's hits, by entries in the namespace;
- how many Pinecone queries a newest-first listing of 100 needs, by namespace
  size, when each query returns an arbitrary 1000 of the matches.
No Pinecone and no network: these are the plugin's own costs.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import tracemalloc
import uuid
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import numpy as np

from adapters.pinecone.overlay import FreshnessOverlay
from adapters.pinecone.reads import newest_memories
from adapters.pinecone.vector_metadata import F_CREATED_US
from adapters.pinecone.vector_metadata import memory_filter
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import SearchQuery

DIM = 384
T0 = datetime(2026, 11, 22, tzinfo=UTC)


def _memory(namespace: str, rng: random.Random, created: datetime = T0) -> MemoryRecord:
    return MemoryRecord(
        id=str(uuid.UUID(int=rng.getrandbits(128))),
        namespace=namespace,
        content="x" * 200,
        kind="fact",
        source="agent",
        created_at=created,
    )


def _vector(rng: np.random.Generator) -> list[float]:
    values = rng.standard_normal(DIM)
    return list(values / np.linalg.norm(values))


def overlay_memory(entries: int) -> None:
    rng, vectors = random.Random(1), np.random.default_rng(1)
    prepared = [(_memory("org:a", rng), _vector(vectors)) for _ in range(entries)]
    tracemalloc.start()
    overlay = FreshnessOverlay(window_s=30.0, max_entries=entries)
    for memory, vector in prepared:
        overlay.memory_written(memory, vector, "epoch")
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"overlay of {entries} entries: {current / 2**20:.1f} MiB"
        f" ({current / entries / 1024:.2f} KiB per entry, records shared with the caller)"
    )


def merge_cost(entries: int) -> None:
    rng, vectors = random.Random(2), np.random.default_rng(2)
    overlay = FreshnessOverlay(window_s=30.0, max_entries=entries + 10)
    for _ in range(entries):
        overlay.memory_written(_memory("org:a", rng), _vector(vectors), "epoch")
    query, flt = _vector(vectors), MemoryFilter(now=T0 - timedelta(days=1))
    timings = []
    for _ in range(50):
        started = time.perf_counter()
        overlay.merge_query("org:a", "epoch", SearchQuery(query), flt, [], 20)
        timings.append((time.perf_counter() - started) * 1000)
    median = statistics.median(timings)
    print(f"merge with {entries:>5} recent writes in the namespace: {median:.2f} ms")


def listing_rounds(size: int) -> None:
    rng = random.Random(size)
    times = sorted(rng.randrange(10**13) for _ in range(size))
    calls = 0

    async def scan(flt: JsonObject) -> list[MemoryRecord]:
        nonlocal calls
        calls += 1
        bounds = [c[F_CREATED_US]["$gte"] for c in flt["$and"] if F_CREATED_US in c]
        since = max(bounds) - to_micros(T0) if bounds else -1
        start = next((i for i, t in enumerate(times) if t >= since), len(times))
        picked = rng.sample(range(start, len(times)), min(1000, len(times) - start))
        return [_memory("org:a", rng, T0 + timedelta(microseconds=times[i])) for i in picked]

    base = memory_filter("epoch", MemoryFilter(now=T0))
    listed = asyncio.run(newest_memories(scan, base, 100, 1000))
    exact = [to_micros(m.created_at) - to_micros(T0) for m in listed] == times[::-1][:100]
    print(f"listing 100 newest of {size:>7} memories: {calls} queries, exact={exact}")


def main() -> None:
    overlay_memory(5000)
    for entries in (10, 100, 1000, 5000):
        merge_cost(entries)
    for size in (500, 5_000, 50_000, 500_000):
        listing_rounds(size)


if __name__ == "__main__":
    main()
