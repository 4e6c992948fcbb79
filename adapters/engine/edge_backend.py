"""The embedded store: Qdrant's own engine (qdrant-edge) on disk, the zero-config default.

`QdrantEdgeBackend`, in an engine worker: lifecycle, health and upkeep, each request answered by
one of its parts (store.py). Why this layout: docs/backends.md, "Embedded (default)".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

from adapters.base import AnsweredBy
from adapters.base import VectorBackend
from adapters.disk import DEFAULT_HEADROOM_BYTES
from adapters.disk import allocated_bytes
from adapters.disk import free_bytes
from adapters.engine.edge_namespaces import EdgeNamespaces
from adapters.engine.edge_reads import EdgeReads
from adapters.engine.edge_transfer import EdgeTransfer
from adapters.engine.edge_writes import EdgeVectorFill
from adapters.engine.edge_writes import EdgeWrites
from adapters.engine.store import EdgeStore
from adapters.engine.upkeep import EdgeChecks
from adapters.engine.upkeep import EdgeUpkeep
from adapters.errors import BackendUnavailable
from adapters.qdrant import ranking
from adapters.store_files import STORE_DIR
from adapters.store_files import refuse_other_layouts
from adapters.store_options import ENGINE_BACKEND
from adapters.store_options import WRITE_DEADLINE_S
from adapters.values import Durability
from adapters.values import SearchMode
from adapters.values import StoreCondition
from adapters.values import StoreSize

# How often the janitor compares the records with the engine (integrity.py).
VERIFY_EVERY_S = 600.0


class QdrantEdgeBackend(VectorBackend):
    """Every namespace as a tenant partition of one of a few qdrant-edge shards."""

    name = ENGINE_BACKEND
    sole_writer = True  # one process opens a store at a time (engine_worker.py, its lock)
    makes_keywords = True  # with the store's encoder (store.py, `keywords`)

    def __init__(
        self,
        dimension: int,
        data_dir: Path,
        *,
        workers: int = 4,
        disk_headroom_bytes: int = DEFAULT_HEADROOM_BYTES,
        durability: Durability = "sync",
        partitions: int = 1,
        write_deadline_s: float = WRITE_DEADLINE_S,
        token_dimension: int | None = None,
    ) -> None:
        self._data_dir = Path(data_dir)
        self._write_deadline_s = write_deadline_s
        store = EdgeStore(
            self._data_dir / STORE_DIR,
            dimension,
            workers,
            disk_headroom_bytes,
            durability,
            partitions,
            token_dimension,
            write_deadline_s,
        )
        super().__init__(dimension, token_dimension)
        self.store = store  # what its parts share: shards, records, disk guard, threads
        self._namespaces = EdgeNamespaces(store)
        self._reads = EdgeReads(store)
        self._writes = EdgeWrites(store, self._reads)
        self._records = store.records
        self._shards = store.shards
        self._checks = EdgeChecks(store, self._namespaces.lost)
        self._upkeep = EdgeUpkeep(store)
        self._watcher: asyncio.Task[None] | None = None

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return ranking.QDRANT_SEARCH_MODES

    @cached_property
    def transfer(self) -> EdgeTransfer:
        return EdgeTransfer(self.store)

    @cached_property
    def store_meta(self) -> EdgeStoreMeta:
        return EdgeStoreMeta(self.store)

    @property
    def store_size(self) -> EdgeStoreMeta:
        return self.store_meta

    @cached_property
    def vector_fill(self) -> EdgeVectorFill:
        return EdgeVectorFill(self.store, self.token_dimension)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.store.calls.start()
        await self.store.calls.worker(self._open)
        self._watcher = asyncio.create_task(self._upkeep.watch(), name="edge shard upkeep")

    def _open(self) -> None:
        refuse_other_layouts(self._data_dir)
        self.store.root.mkdir(parents=True, exist_ok=True)
        self._records.open()
        self._shards.open()
        self._checks.run(at_start=True)
        self._namespaces.lost.settle()

    async def verify(self) -> tuple[str, ...]:
        """Compare the namespace records with the memories the engine holds (verify-store)."""
        unreadable = self.condition().unreadable_namespaces
        return await self.store.calls.worker(self._checks.verify, unreadable)  # not on the loop

    async def accept(self) -> list[str]:
        """verify-store --accept: the store as it is now is vouched for (upkeep.py)."""
        return await self.store.calls.worker(self._checks.accept)

    async def close(self) -> None:
        calls = self.store.calls
        if not calls.started:
            return
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        for part in (self._writes, self._reads, self._namespaces):  # what it started, first
            await part.drain()
        await self.store.commit.drain()
        await calls.synced_behind()  # the counts written behind the last sync
        await calls.worker(self._close)
        calls.stop()

    def _close(self) -> None:
        self._shards.close()  # flushed: the engine syncs what the log held
        counts = self._records.count_store
        if held := counts.take_held():
            counts.write(held)
        self.store.log_sync.close()
        self._records.close()

    async def maintain(self) -> None:
        await self._namespaces.purge_pending()
        await self._upkeep.run()
        if time.monotonic() - self._checks.verified_at >= VERIFY_EVERY_S:
            await self.verify()

    async def ping(self) -> None:
        await self.store.calls.worker(self._check_writable)
        self.store.commit.retry()  # after a failed sync, whether the disk takes one now

    def _check_writable(self) -> None:
        if not os.access(self.store.root, os.W_OK | os.X_OK):
            raise BackendUnavailable("the data directory is not writable")
        # Meanwhile health is 200 `degraded`: the disk.
        if self._shards.waiting_for_room and (opened := self._shards.retry_waiting()):
            self._checks.opened_late(opened)
        if self._shards.all_down:
            raise BackendUnavailable(
                "the embedded memory store could not be opened at start (damaged files);"
                " see the plugin log and docs/repair.md#a-shard-does-not-open"
            )
        self.store.disk.refresh()

    def condition(self) -> StoreCondition:
        full = next(iter(self._shards.waiting_for_room.values()), None) or self.store.disk.problem
        unsynced = self.store.commit.watch.problem(self._write_deadline_s)
        disk = tuple(line for line in (full, unsynced) if line)
        problems = disk + self._checks.problems()
        unreadable = set(self._records.damaged) | set(self._shards.down(self._records.live))
        unreadable |= self._checks.unreadable()
        writes = self.store.commit.watch.state(volume_full=self.store.disk.refused)
        return StoreCondition(tuple(sorted(unreadable)), problems, writes)

    # -- the request surface: each call answered by its part ---------------------------

    get_namespace = AnsweredBy("_namespaces")
    get_namespaces = AnsweredBy("_namespaces")
    save_namespace = AnsweredBy("_namespaces")
    delete_namespace = AnsweredBy("_namespaces")
    list_namespaces = AnsweredBy("_namespaces")
    expired_namespaces = AnsweredBy("_namespaces")
    get_stored_memory = AnsweredBy("_reads")
    query_memories = AnsweredBy("_reads")
    list_memories = AnsweredBy("_reads")
    upsert_memory = AnsweredBy("_writes")
    upsert_batch = AnsweredBy("_writes")
    delete_memory = AnsweredBy("_writes")
    delete_expired_memories = AnsweredBy("_writes")


class EdgeStoreMeta:
    """Store-wide facts: the embedding fingerprint, in the records' SQLite file (`store_meta`),
    and the store's size (`store_size`)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

    async def read_store_meta(self) -> Mapping[str, str]:
        return await self._store.calls.worker(self._store.records.meta)

    async def write_store_meta(self, key: str, value: str) -> None:
        """After the shards' writes so far are synced: a fact such as "keyword index
        complete" must not be on disk ahead of the writes it speaks of."""
        await self._store.barrier()
        await self._store.calls.worker(
            self._store.guarded, self._store.records.set_meta, key, value
        )

    async def measure(self) -> StoreSize:
        return await self._store.calls.worker(self._measure, background=True)

    def _measure(self) -> StoreSize:
        records = self._store.records  # lock-free: dictionaries copied whole
        live, counts = list(records.live.values()), dict(records.count_store.counts)
        namespaces, memories = len(live), sum(counts.get(n.epoch, 0) for n in live)
        root = self._store.root
        return StoreSize(namespaces, memories, allocated_bytes(root), free_bytes(root))
