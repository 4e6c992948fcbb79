"""Merging the parts of one answer, for adapters that ask per namespace, pin side or worker.

In the contract's order: pinned first, then best or newest first, the id breaking ties. The
`Merge` functions combine several engine workers' answers to one call (adapters/crossings.py).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from typing import Any

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.errors import StorageDamaged
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import StoreSize

if TYPE_CHECKING:
    from adapters.crossings import Call

Merge = Callable[[Sequence[Any], "Call"], Any]


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
    `StorageDamaged` (its names unreadable) is raised only when no part found one live
    (a 503, not an empty answer that reads as namespaces without memories); any other
    failure is raised."""
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


def nothing(answers: Sequence[Any], call: Call) -> None:
    answered(answers)


def serving(answers: Sequence[Any], call: Call) -> None:
    """A ping answers while any worker does: one restarting is a degradation (its condition
    says so), not an outage of the whole store."""
    failures = [a for a in answers if isinstance(a, BaseException)]
    if failures and len(failures) == len(answers):
        raise failures[0]
    for failure in failures:
        if not isinstance(failure, BackendUnavailable):
            raise failure


def lines(answers: Sequence[Any], call: Call) -> tuple[str, ...]:
    return tuple(line for found in answered(answers) for line in found)


def sorted_names(answers: Sequence[Any], call: Call) -> list[str]:
    return sorted(name for found in answered(answers) for name in found)


def concatenated(answers: Sequence[Any], call: Call) -> list[Any]:
    return [item for found in answered(answers) for item in found]


def summed(answers: Sequence[Any], call: Call) -> int:
    return sum(answered(answers))


def namespaces(answers: Sequence[Any], call: Call) -> dict[str, NamespaceRecord]:
    return merge_namespaces(answers)


def scored(answers: Sequence[Any], call: Call) -> list[ScoredMemory]:
    return merge_scored(answered(answers), call.arg("limit"))


def listed(answers: Sequence[Any], call: Call) -> list[MemoryRecord]:
    return merge_listed(answered(answers), call.arg("limit"))


def agreed(answers: Sequence[Any], call: Call) -> dict[str, str]:
    """Store-wide facts, the same in every worker's store; stores that disagree are refused."""
    facts: dict[str, str] = {}
    for found in answered(answers):
        for key, value in found.items():
            if facts.setdefault(key, value) != value:
                raise BackendMisconfigured(
                    f"the engine workers' stores disagree on {key!r}: they were not"
                    " written by one plugin; see docs/repair.md#engine-workers"
                )
    return facts


def sizes(answers: Sequence[Any], call: Call) -> StoreSize:
    found: Sequence[StoreSize] = answered(answers)
    used = [s.bytes_used for s in found if s.bytes_used is not None]
    free = [s.bytes_free for s in found if s.bytes_free is not None]
    return StoreSize(
        sum(s.namespaces for s in found),
        sum(s.memories for s in found),
        sum(used) if used else None,
        min(free) if free else None,  # one volume, seen by each
    )
