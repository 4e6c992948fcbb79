"""Pinned-first merging, for adapters that must ask per namespace or per pin side.

The Qdrant layouts answer a multi-namespace search with one engine request; a
Pinecone index (one namespace per query) and the `collections` layout (one
collection per namespace) cannot, so they query each namespace and pin side
and merge here. The order is the contract's `ORDER BY pin DESC, score|created_at
DESC`, with the id as a last, stable tie-break.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import ScoredMemory


def pin_sides(memory_filter: MemoryFilter) -> list[MemoryFilter]:
    """The one-sided filters to ask for: pinned first, then unpinned (or the one side asked)."""
    if memory_filter.pinned is not None:
        return [memory_filter]
    return [replace(memory_filter, pinned=True), replace(memory_filter, pinned=False)]


def merge_scored(parts: Iterable[Iterable[ScoredMemory]], limit: int) -> list[ScoredMemory]:
    hits = [hit for part in parts for hit in part]
    hits.sort(key=lambda h: (h.memory.pin, h.score, h.memory.created_at, h.memory.id), reverse=True)
    return hits[:limit]


def merge_listed(parts: Iterable[Iterable[MemoryRecord]], limit: int) -> list[MemoryRecord]:
    memories = [memory for part in parts for memory in part]
    memories.sort(key=lambda m: (m.pin, m.created_at, m.id), reverse=True)
    return memories[:limit]
