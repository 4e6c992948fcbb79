"""The janitor's work on the engine's files: flush what was written, vacuum what churned, reopen.

The engine holds the GIL through `flush` and `optimize` (engine_calls.py), so every request
waits while one runs. So each engine call does one shard, only a shard written since its last
flush (or vacuum) is touched, and the work waits for a quiet moment: a sweep that finds no
request's engine call for `QUIET_S`, or `DEADLINE_S` of waiting, whatever the load.
Nothing acknowledged depends on a flush: each update is in the engine's write-ahead log, synced
before the write is acknowledged (log_sync.py). A flush lets the log be cut (a start replays
less); a vacuum gives back the space of replaced and deleted points. A reopen (close the shard,
load it from its files) compacts its payload indexes, which speeds a search's filter checks: a
shard written `REOPEN_AFTER_WRITES` times since opened is reopened at a quiet moment only, on the
event loop with no engine call in flight, unless it holds over `REOPEN_MAX_POINTS` points.
"""

from __future__ import annotations

import asyncio
import logging
import time

from adapters.qdrant.edge.disk import allocated_bytes
from adapters.qdrant.edge.engine import fatal
from adapters.qdrant.edge.store import EdgeStore, Upkeep

# Vacuum once this many points were replaced or deleted since the last time.
OPTIMIZE_AFTER_CHANGES = 20_000
# The engine idle this long (no request's call): a flush or a vacuum stalls nobody.
QUIET_S = 1.0
# Work waiting this long (since the shard's first write after the last time) runs anyway.
DEADLINE_S = 300.0
# Reopen a shard after this many writes (engine updates) since it was opened ...
REOPEN_AFTER_WRITES = 1_000
# ... unless it holds more points than this (its load would hold the GIL too long).
REOPEN_MAX_POINTS = 100_000
# How often the watcher looks for a quiet moment to reopen a shard.
WATCH_S = 0.5

log = logging.getLogger(__name__)


class EdgeUpkeep:
    """Flushes and vacuums, one shard per engine call (run on a worker thread); reopens."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._next_vacuum = 0  # where the next due vacuum starts looking

    async def watch(self) -> None:
        """Reopen shards at quiet moments, between the janitor's sweeps (until cancelled)."""
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                self.reopen_one()
            except BaseException as error:
                if fatal(error):
                    raise
                log.warning("shard reopen failed (retried later): %s", error)

    def reopen_one(self) -> bool:
        """Reopen the first shard due, here on the event loop, if nothing is in flight and
        the engine has been quiet for QUIET_S; whether one was."""
        store, calls = self._store, self._store.calls
        if not calls.alone() or calls.idle_for() < QUIET_S:
            return False
        for index, shard in enumerate(store.shards.shards):
            writes = store.writes_since_open(index)
            if shard is None or writes < REOPEN_AFTER_WRITES:
                continue
            points = shard.info().points_count
            if points > REOPEN_MAX_POINTS:
                continue
            started = time.perf_counter()
            if store.reopen(index):
                log.info(
                    "memory shard %02d reopened (%d points, %d writes since opened) in %.3f s",
                    index,
                    points,
                    writes,
                    time.perf_counter() - started,
                )
                return True
        return False

    async def run(self) -> None:
        calls = self._store.calls
        if self._store.changes >= OPTIMIZE_AFTER_CHANGES:
            await calls.worker(self.vacuum_one, background=True)
        for index in range(len(self._store.shards.shards)):
            if self._due(index, "flush"):
                await calls.worker(self.flush, index, background=True)
        self.reopen_one()

    def _due(self, index: int, since: Upkeep) -> bool:
        written_at = self._store.written_at(index, since=since)
        if written_at is None:
            return False
        calls = self._store.calls
        return calls.idle_for() >= QUIET_S or calls.clock() - written_at >= DEADLINE_S

    def vacuum_one(self) -> None:
        """Rewrite the next shard written since its last vacuum, in turn, once due (a
        quiet moment or the deadline); with none left, the change count starts again."""
        store, shards = self._store, self._store.shards
        count = len(shards.shards)
        for step in range(count):
            index = (self._next_vacuum + step) % count
            shard = shards.shards[index]
            if shard is None or store.written_at(index, since="vacuum") is None:
                continue
            self._next_vacuum = index  # not due yet: it is still next
            if self._due(index, "vacuum"):
                # rewrites the segment: only with room for a second copy
                store.disk.check(extra_bytes=allocated_bytes(shards.paths[index]))
                store.settled(index, since="vacuum")
                shard.optimize()
                self._next_vacuum = (index + 1) % count
            return
        store.changes = 0

    def flush(self, index: int) -> None:
        shard = self._store.shards.shards[index]
        if shard is not None:
            self._store.settled(index, since="flush")  # a write during the flush marks it again
            shard.flush()
