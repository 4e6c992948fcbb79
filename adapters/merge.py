"""Merging the parts of one answer, for adapters that ask per namespace, pin side or worker.

In the contract's order: pinned first, then best or newest first, the id breaking ties.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from adapters.errors import StorageDamaged
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
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


def merge_namespaces(
    parts: Iterable[Mapping[str, NamespaceRecord] | BaseException],
) -> dict[str, NamespaceRecord]:
    """The live records the parts found, as one store answers `get_namespaces`: a part's
    `StorageDamaged` is raised only when no part found one live; any other failure is."""
    found: dict[str, NamespaceRecord] = {}
    damaged: StorageDamaged | None = None
    for part in parts:
        if isinstance(part, StorageDamaged):
            damaged = damaged or part
        elif isinstance(part, BaseException):
            raise part
        else:
            found.update(part)
    if not found and damaged is not None:
        raise damaged
    return found


def answered(answers: Sequence[Any]) -> Sequence[Any]:
    """`answers`, once none is a failure; the first failure raised otherwise."""
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers
