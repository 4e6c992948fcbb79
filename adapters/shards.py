"""Open qdrant-edge shards, one per namespace, bounded and safe to share across threads.

Every open `EdgeShard` runs a search thread of its own, so the pool keeps at most
`max_open` of them and closes the least recently used idle one when a new one is
needed (opening a 30k-point shard from disk takes about 60 ms here). A shard in
use by a worker thread is never closed under it: `exclusive()` (namespace
delete, shutdown) waits until its users have left and blocks new ones.

All methods block; the adapter calls them from its worker threads, never from
the event loop.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qdrant_edge as qe


@dataclass
class _Entry:
    shard: Any
    users: int = 0
    changes_since_optimize: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class ShardPool:
    """LRU of open shards keyed by directory."""

    def __init__(self, open_shard: Callable[[Path, bool], Any | None], max_open: int) -> None:
        self._open_shard = open_shard
        self._max_open = max_open
        self._entries: OrderedDict[Path, _Entry] = OrderedDict()
        self._busy: set[Path] = set()
        self._cond = threading.Condition()

    @contextmanager
    def use(self, path: Path, *, create: bool = False) -> Iterator[_Entry | None]:
        """Borrow the shard at `path` (opened or created on demand); None if absent."""
        entry = self._acquire(path, create)
        try:
            yield entry
        finally:
            if entry is not None:
                with self._cond:
                    entry.users -= 1
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self, path: Path) -> Iterator[None]:
        """Close the shard at `path` and keep it closed for the duration."""
        with self._cond:
            while path in self._busy:
                self._cond.wait()
            self._busy.add(path)
            entry = self._entries.get(path)
            while entry is not None and entry.users:
                self._cond.wait()
            if entry is not None:
                del self._entries[path]
        try:
            if entry is not None:
                entry.shard.close()
            yield
        finally:
            with self._cond:
                self._busy.discard(path)
                self._cond.notify_all()

    def open_paths(self) -> list[Path]:
        with self._cond:
            return list(self._entries)

    def close_all(self) -> None:
        for path in self.open_paths():
            with self.exclusive(path):
                pass

    def _acquire(self, path: Path, create: bool) -> _Entry | None:
        with self._cond:
            while path in self._busy:
                self._cond.wait()
            entry = self._entries.get(path)
            if entry is None:
                shard = self._open_shard(path, create)
                if shard is None:
                    return None
                entry = _Entry(shard=shard)
                self._entries[path] = entry
                self._evict_idle()
            self._entries.move_to_end(path)
            entry.users += 1
            return entry

    def _evict_idle(self) -> None:
        """Close least recently used idle shards beyond the bound (caller holds the lock)."""
        excess = len(self._entries) - self._max_open
        for path in list(self._entries):
            if excess <= 0:
                return
            entry = self._entries[path]
            if entry.users == 0 and path not in self._busy:
                del self._entries[path]
                entry.shard.flush()
                entry.shard.close()
                excess -= 1


def edge_config(dimension: int) -> Any:
    """Shard settings: cosine, one search thread, HNSW indexing off.

    Indexing is off on purpose (`indexing_threshold=0`): qdrant-edge builds HNSW
    inside `optimize()` while holding the GIL, freezing the whole server (0.77 s
    for 10k real embeddings, 18 s for 50k random vectors, measured here). Recall
    was not the problem on real embeddings (1.0 at 10k, `benchmarks/recall.py`),
    only on random vectors (0.60 with default search settings). Without an index
    every search is exact (recall 1.0 by construction) at about 0.7 ms per 10k
    points; `optimize()` then only vacuums and merges (0.16 s for 50k points).
    """
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
        max_search_threads=1,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
    )
