"""Read-your-writes on an eventually consistent index: a bounded overlay of recent writes.

What this process wrote or deleted in the last `window_s` seconds, merged into every read of
the same namespace epoch. See docs/backends.md, "Pinecone" (Freshness).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from adapters.pinecone.keywords import keyword_score
from adapters.pinecone.vector_metadata import matches
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from adapters.values import SparseVector

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """A recent upsert (`memory` set) or delete (`memory` None) of one id."""

    memory: MemoryRecord | None
    vector: Vector | None
    epoch: str
    written_at: float
    keywords: SparseVector | None = None  # stored beside it on a dotproduct index


@dataclass(frozen=True, slots=True)
class NamespaceEntry:
    """A recent save (`record` set) or delete (`record` None) of a namespace."""

    name: str
    record: NamespaceRecord | None
    epoch: str | None
    written_at: float


_Key = tuple[str, str]
# A recent upsert: the memory, its dense vector, its keyword vector (if stored).
Fresh = tuple[MemoryRecord, Vector, SparseVector | None]


class FreshnessOverlay:
    def __init__(
        self,
        window_s: float,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self.clock = clock
        self.evicted_early = 0
        self._memories: OrderedDict[_Key, MemoryEntry] = OrderedDict()
        self._by_namespace: dict[str, set[str]] = {}
        self._namespaces: OrderedDict[str, NamespaceEntry] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._memories) + len(self._namespaces)

    # -- writes ------------------------------------------------------------------------

    def memory_written(
        self,
        memory: MemoryRecord,
        vector: Sequence[float],
        epoch: str,
        keywords: SparseVector | None = None,
    ) -> None:
        array = np.asarray(vector, dtype=np.float32)
        entry = MemoryEntry(memory, array, epoch, self.clock(), keywords)
        self._put((memory.namespace, memory.id), entry)

    def memory_placed(self, namespace: str, memory_id: str, position: int, epoch: str) -> None:
        """A recent upsert's memory given its place in the write order (nothing else)."""
        entry = self._memories.get((namespace, memory_id))
        if entry is not None and entry.memory is not None and entry.epoch == epoch:
            placed = replace(entry.memory, position=position)
            self._memories[(namespace, memory_id)] = replace(entry, memory=placed)

    def memory_deleted(self, namespace: str, memory_id: str, epoch: str) -> None:
        self._put((namespace, memory_id), MemoryEntry(None, None, epoch, self.clock()))

    def namespace_saved(self, record: NamespaceRecord, epoch: str) -> None:
        self._put_namespace(record.name, NamespaceEntry(record.name, record, epoch, self.clock()))

    def namespace_deleted(self, name: str) -> None:
        for memory_id in self._by_namespace.pop(name, set()):
            self._memories.pop((name, memory_id), None)
        self._put_namespace(name, NamespaceEntry(name, None, None, self.clock()))

    # -- reads -------------------------------------------------------------------------

    def namespace(self, name: str) -> NamespaceEntry | None:
        self._expire()
        return self._namespaces.get(name)

    def namespaces(self) -> list[NamespaceEntry]:
        self._expire()
        return list(self._namespaces.values())

    def memory(self, namespace: str, memory_id: str, epoch: str) -> MemoryEntry | None:
        self._expire()
        entry = self._memories.get((namespace, memory_id))
        return entry if entry is not None and entry.epoch == epoch else None

    def ids_in(self, namespace: str) -> set[str]:
        """Ids with a recent write or delete: Pinecone's answer for them may be stale."""
        self._expire()
        return set(self._by_namespace.get(namespace, ()))

    def live_memories(self, namespace: str, epoch: str) -> list[Fresh]:
        """Recent upserts (not deletes) of this namespace epoch, with their vectors."""
        entries = (self._memories[(namespace, i)] for i in self.ids_in(namespace))
        return [
            (e.memory, e.vector, e.keywords)
            for e in entries
            if e.memory is not None and e.vector is not None and e.epoch == epoch
        ]

    def merge_query(
        self,
        namespace: str,
        epoch: str,
        query: SearchQuery,
        memory_filter: MemoryFilter,
        from_index: list[ScoredMemory],
        limit: int,
    ) -> list[ScoredMemory]:
        """Pinecone's hits with recent writes applied (scored as Pinecone would), best first."""
        recent = self.ids_in(namespace)
        merged = [hit for hit in from_index if hit.memory.id not in recent]
        fresh = [
            item for item in self.live_memories(namespace, epoch) if matches(item[0], memory_filter)
        ]
        if fresh and query.dense is not None:
            dense = np.asarray(query.dense, dtype=np.float32)
            stacked = np.stack([vector for _, vector, _ in fresh])
            norms = np.linalg.norm(stacked, axis=1) * float(np.linalg.norm(dense))
            scores = stacked @ dense / np.where(norms == 0, 1.0, norms)
            merged += [
                ScoredMemory(memory, float(s) + keyword_score(query.keywords, keywords))
                for (memory, _, keywords), s in zip(fresh, scores, strict=True)
            ]
        merged.sort(key=lambda hit: (hit.score, hit.memory.created_at, hit.memory.id), reverse=True)
        return merged[:limit]

    def merge_listing(
        self,
        namespace: str,
        epoch: str,
        memory_filter: MemoryFilter,
        from_index: list[MemoryRecord],
        limit: int,
    ) -> list[MemoryRecord]:
        """Pinecone's listing with recent writes applied, newest first."""
        recent = self.ids_in(namespace)
        merged = [memory for memory in from_index if memory.id not in recent]
        merged += [
            memory
            for memory, _, _ in self.live_memories(namespace, epoch)
            if matches(memory, memory_filter)
        ]
        merged.sort(key=lambda memory: (memory.created_at, memory.id), reverse=True)
        return merged[:limit]

    # -- bounds ------------------------------------------------------------------------

    def _put(self, key: _Key, entry: MemoryEntry) -> None:
        self._memories.pop(key, None)
        self._memories[key] = entry
        self._by_namespace.setdefault(key[0], set()).add(key[1])
        self._trim()

    def _put_namespace(self, name: str, entry: NamespaceEntry) -> None:
        self._namespaces.pop(name, None)
        self._namespaces[name] = entry
        self._trim()

    def _expire(self) -> None:
        oldest_kept = self.clock() - self.window_s
        while self._memories and next(iter(self._memories.values())).written_at <= oldest_kept:
            self._drop_memory(next(iter(self._memories)))
        while self._namespaces and next(iter(self._namespaces.values())).written_at <= oldest_kept:
            self._namespaces.popitem(last=False)

    def _trim(self) -> None:
        self._expire()
        while len(self) > self.max_entries:
            self.evicted_early += 1
            memory_first = self._memories and (
                not self._namespaces
                or next(iter(self._memories.values())).written_at
                <= next(iter(self._namespaces.values())).written_at
            )
            if memory_first:
                self._drop_memory(next(iter(self._memories)))
            else:
                self._namespaces.popitem(last=False)

    def _drop_memory(self, key: _Key) -> None:
        del self._memories[key]
        ids = self._by_namespace.get(key[0])
        if ids is not None:
            ids.discard(key[1])
            if not ids:
                del self._by_namespace[key[0]]
