"""The embedded store's upkeep beside the requests: the janitor's work and the self-checks.

`EdgeUpkeep` flushes, vacuums and reopens shards at quiet moments (docs/behaviour.md); `EdgeChecks`
keeps the last integrity report and what health says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from adapters.disk import allocated_bytes
from adapters.engine import integrity
from adapters.engine.edge_namespaces import LostRecords
from adapters.engine.engine import fatal
from adapters.engine.integrity import IntegrityReport
from adapters.engine.integrity import some
from adapters.engine.shard_writes import Upkeep
from adapters.engine.store import EdgeStore

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
# A flush or vacuum that held the engine this long is logged (requests waited behind it).
SLOW_S = 0.1

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
        """Reopen the first shard due, here on the event loop, if nothing is in flight, the
        engine has been quiet for QUIET_S and the disk answers; whether one was."""
        store, calls = self._store, self._store.calls
        if not calls.alone() or calls.idle_for() < QUIET_S or store.commit.watch.stalled():
            return False
        for index, shard in enumerate(store.shards.shards):
            writes = store.writes.since_open(shard)
            if shard is None or writes < REOPEN_AFTER_WRITES:
                continue
            points = shard.info().points_count
            if points > REOPEN_MAX_POINTS:
                continue
            started = time.perf_counter()
            if self.reopen(index):
                log.info(
                    "memory shard %02d reopened (%d points, %d writes since opened) in %.3f s",
                    index,
                    points,
                    writes,
                    time.perf_counter() - started,
                )
                return True
        return False

    def reopen(self, index: int) -> bool:
        """Load shard `index` again from its files (flushed; a vacuum due stays due); whether it
        was. Its writes count from zero again whatever the outcome: a failed one waits."""
        shards, writes = self._store.shards, self._store.writes
        old = shards.shards[index]
        if old is None:
            return False
        vacuum_due = writes.reopening(old)
        new = shards.reopen(index)
        if shards.shards[index] is old:  # left as it was (no room to map it again)
            return False
        writes.reopened(old, new, vacuum_due)
        return new is not None  # None: damaged on loading again (logged, served as at start)

    async def run(self) -> None:
        """Vacuum, flush and reopen what is due; nothing while the disk has stalled: the
        engine holds the GIL through a flush, and would stop the worker until it answered."""
        calls = self._store.calls
        if self._store.commit.watch.stalled():
            return
        if self._store.writes.changes >= OPTIMIZE_AFTER_CHANGES:
            await calls.worker(self.vacuum_one, background=True)
        for index in range(len(self._store.shards.shards)):
            if self._due(index, "flush"):
                await calls.worker(self.flush, index, background=True)
        self.reopen_one()

    def _due(self, index: int, since: Upkeep) -> bool:
        written_at = self._store.writes.written_at(self._store.shards.shards[index], since)
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
            if shard is None or store.writes.written_at(shard, "vacuum") is None:
                continue
            self._next_vacuum = index  # not due yet: it is still next
            if self._due(index, "vacuum"):
                # rewrites the segment: only with room for a second copy
                store.disk.check(extra_bytes=allocated_bytes(shards.paths[index]))
                store.writes.settled(shard, "vacuum")
                _timed("vacuum", index, shard.optimize)
                self._next_vacuum = (index + 1) % count
            return
        store.writes.changes = 0

    def flush(self, index: int) -> None:
        shard = self._store.shards.shards[index]
        if shard is not None:
            self._store.writes.settled(shard, "flush")  # a write during the flush marks it again
            _timed("flush", index, shard.flush)


def _timed(work: str, index: int, call: Callable[[], object]) -> None:
    """`call()`, logged when it held the engine (and so the worker) `SLOW_S` or more."""
    started = time.perf_counter()
    call()
    held = time.perf_counter() - started
    if held >= SLOW_S:
        log.info("memory shard %02d: the janitor's %s held the engine %.3f s", index, work, held)


class EdgeChecks:
    """The last integrity report and what follows from it."""

    def __init__(self, store: EdgeStore, lost: LostRecords) -> None:
        self._store = store
        self._lost = lost
        self.report = IntegrityReport()
        self.verified_at = float("-inf")

    def run(self, *, at_start: bool = False) -> IntegrityReport:
        store = self._store
        unreadable = self.report.unreadable
        self.report = integrity.check(store.shards, store.records, at_start=at_start)
        if not at_start:  # rebuilt at start and unreadable then: still, unless dropped since
            self.report.unreadable = [n for n in unreadable if n in store.records.live]
        store.short = frozenset(s.epoch for s in self.report.shortfalls)
        self.verified_at = time.monotonic()
        return self.report

    def opened_late(self, indexes: list[int]) -> None:
        """Shards a full volume kept closed opened: rebuild the records they hold."""
        store = self._store
        found = integrity.rebuild(store.shards, store.records, indexes)
        self.report.unreadable += found.unreadable
        self._lost.opened(indexes)
        self.run()  # and compare their namespaces' counts, left out at start

    def problems(self) -> tuple[str, ...]:
        return self.report.problems() + self._lost.problems()

    def unreadable(self) -> set[str]:
        """Names that answer 503 for want of data: unknown ones asked for, rebuilt unreadable."""
        store = self._store
        found = {name for name in self._lost.asked if self._lost.covers(name)}
        return found | {name for name in self.report.unreadable if name in store.records.live}

    def verify(self, unreadable: tuple[str, ...]) -> tuple[str, ...]:
        """verify-store's lines: a check now, with the names that answer 503 anyway."""
        self.run()
        found = (f"{len(unreadable)} namespace(s) unreadable: {some(unreadable)}",)
        return (found if unreadable else ()) + self.problems()

    def accept(self) -> list[str]:
        """An operator vouches for the store as it is (verify-store --accept): rebuilt
        records are confirmed, and short counts set to what the engine holds (after an
        import restored what it could, or to accept the loss). The names concerned."""
        self.run()
        records = self._store.records
        records.set_counts({s.epoch: s.found for s in self.report.shortfalls})
        names = records.accept_rebuilt() + [s.name for s in self.report.shortfalls]
        self.run()
        return sorted(set(names))
