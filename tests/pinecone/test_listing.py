"""The newest-first listing over an unordered, capped query (adapters/pinecone/reads.py).

The scan here behaves like a Pinecone query used for listing: it returns at
most `scan_size` of the matching memories, in an order unrelated to time.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from adapters.pinecone.reads import newest_memories
from adapters.pinecone.vector_metadata import F_CREATED_US
from adapters.pinecone.vector_metadata import memory_filter
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from tests.support.records import T0
from tests.support.records import memory


def _lower_bound(flt: JsonObject) -> int:
    bounds = [c[F_CREATED_US]["$gte"] for c in flt["$and"] if F_CREATED_US in c]
    return max(bounds, default=-1)


class UnorderedScan:
    def __init__(self, memories: list[MemoryRecord], scan_size: int, seed: int) -> None:
        self.memories = memories
        self.scan_size = scan_size
        self.random = random.Random(seed)
        self.calls = 0

    async def __call__(self, flt: JsonObject) -> list[MemoryRecord]:
        self.calls += 1
        since = _lower_bound(flt)
        matching = [m for m in self.memories if to_micros(m.created_at) >= since]
        self.random.shuffle(matching)
        return matching[: self.scan_size]


def _memories(count: int, seed: int, spread_s: int = 10**7) -> list[MemoryRecord]:
    rng = random.Random(seed)
    return [
        memory("org:acme", created_at=T0 - timedelta(microseconds=rng.randrange(spread_s * 10**6)))
        for _ in range(count)
    ]


BASE = memory_filter("epoch", MemoryFilter(now=T0))


@pytest.mark.parametrize(("count", "want"), [(0, 100), (50, 100), (999, 100), (5000, 100)])
async def test_listing_is_exact_newest_first(count: int, want: int) -> None:
    stored = _memories(count, seed=count)
    scan = UnorderedScan(stored, scan_size=1000, seed=7)
    listed = await newest_memories(scan, BASE, want, 1000)
    expected = sorted(stored, key=lambda m: (m.created_at, m.id), reverse=True)[:want]
    assert listed == expected
    assert scan.calls == 1 if count < 1000 else scan.calls >= 2


async def test_a_large_namespace_needs_few_rounds() -> None:
    stored = _memories(50_000, seed=1)
    scan = UnorderedScan(stored, scan_size=1000, seed=2)
    listed = await newest_memories(scan, BASE, 100, 1000)
    assert listed == sorted(stored, key=lambda m: (m.created_at, m.id), reverse=True)[:100]
    assert 2 <= scan.calls <= 4


async def test_identical_times_beyond_the_scan_return_a_best_effort_without_looping() -> None:
    stored = [memory("org:acme", created_at=T0) for _ in range(1500)]
    scan = UnorderedScan(stored, scan_size=1000, seed=3)
    listed = await newest_memories(scan, BASE, 100, 1000)
    assert len(listed) == 100
    assert {m.created_at for m in listed} == {T0}
    assert scan.calls == 2
