"""The janitor's work on the engine's files: flush what was written, vacuum what churned.

The engine holds the GIL through `flush` and `optimize` (dispatch.py), so every
request waits while one runs, refusals included; under a write flood a flush
waits on the disk, GIL held, many times longer than alone. So:
- each engine call does one shard, and only a shard written since the last
  flush (or vacuum) is touched: under a flood into one namespace a sweep
  flushes that namespace's shard, not all sixteen;
- the work waits for a quiet moment: it runs at a sweep that finds no request's
  engine call for `QUIET_S`, or once it has waited `DEADLINE_S` whatever the load.

Nothing acknowledged depends on a flush: each update is in the engine's
write-ahead log before it returns (tests/store/test_durability.py). A flush
persists the segments so that the log can be cut and a start replays less; a
vacuum gives back the space of replaced and deleted points.
"""

from __future__ import annotations

from adapters.qdrant.edge.disk import allocated_bytes
from adapters.qdrant.edge.store import EdgeStore, Upkeep

# Vacuum once this many points were replaced or deleted since the last time.
OPTIMIZE_AFTER_CHANGES = 20_000
# The engine idle this long (no request's call): a flush or a vacuum stalls nobody.
QUIET_S = 1.0
# Work waiting this long (since the shard's first write after the last time) runs anyway.
DEADLINE_S = 300.0


class EdgeUpkeep:
    """Flushes and vacuums, one shard per engine call (run on a worker thread)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._next_vacuum = 0  # where the next due vacuum starts looking

    async def run(self) -> None:
        calls = self._store.calls
        if self._store.changes >= OPTIMIZE_AFTER_CHANGES:
            await calls.worker(self.vacuum_one, background=True)
        for index in range(len(self._store.shards.shards)):
            if self._due(index, "flush"):
                await calls.worker(self.flush, index, background=True)

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
