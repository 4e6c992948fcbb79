"""The embedded backend: Qdrant's own engine in-process (qdrant-edge), on disk.

The zero-config default. Layout under `data_dir`:

    namespaces/<collection name>/namespace.json   the namespace record
    namespaces/<collection name>/shard/           one EdgeShard: that namespace's memories

A namespace is a collection, as on a Qdrant server: one shard of its own, named by
`adapters.naming.collection_name`. `namespace.json` is written last on creation
(tmp file, fsync, rename), so a directory without it is an interrupted creation
and is removed at start. A delete renames the directory away first, so it is
atomic, then removes the files.

Durability: qdrant-edge appends every update to its write-ahead log before
`update()` returns, so an acknowledged write survives a `kill -9` of the
process (tests/test_durability.py). Segments are flushed by the janitor and on
close.

qdrant-edge calls are synchronous; they run on a small thread pool (they release
the GIL while they work), never on the event loop. This is a single-writer
store: one plugin process per data directory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from adapters import naming
from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, ScoredMemory, VectorBackend
from adapters.errors import BackendError, BackendUnavailable, NamespaceConflict, NamespaceGone
from adapters.payload import (
    FIELD_CREATED_US,
    FIELD_EXPIRES_US,
    FIELD_KIND,
    FIELD_PINNED,
    memory_from_payload,
    memory_to_payload,
    namespace_from_json,
    namespace_to_json,
    to_micros,
)
from adapters.shards import ShardPool, edge_config

log = logging.getLogger(__name__)

T = TypeVar("T")
RECORD_FILE = "namespace.json"
SHARD_DIR = "shard"
TRASH_PREFIX = ".trash-"
# Vacuum a shard once this many points were replaced or deleted since the last time.
OPTIMIZE_AFTER_CHANGES = 1000

_INDEXES = {
    FIELD_CREATED_US: qe.PayloadSchemaType.Integer,
    FIELD_EXPIRES_US: qe.PayloadSchemaType.Integer,
    FIELD_PINNED: qe.PayloadSchemaType.Integer,
    FIELD_KIND: qe.PayloadSchemaType.Keyword,
}


def _expired_by(now: datetime) -> Any:
    """Memories whose `expires_at` is at or before `now`."""
    return qe.FieldCondition(FIELD_EXPIRES_US, range=qe.RangeFloat(lte=float(to_micros(now))))


def edge_filter(memory_filter: MemoryFilter) -> Any:
    must: list[Any] = []
    if memory_filter.pinned is not None:
        must.append(qe.FieldCondition(FIELD_PINNED, match=qe.MatchValue(int(memory_filter.pinned))))
    if memory_filter.kinds is not None:
        must.append(qe.FieldCondition(FIELD_KIND, match=qe.MatchAny(sorted(memory_filter.kinds))))
    return qe.Filter(must=must or None, must_not=[_expired_by(memory_filter.now)])


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class QdrantEdgeBackend(VectorBackend):
    """Namespaces as qdrant-edge shards under one data directory."""

    name = "qdrant-edge"

    def __init__(
        self,
        dimension: int,
        data_dir: Path,
        *,
        max_open_shards: int = 64,
        workers: int = 4,
        prefix: str = naming.DEFAULT_PREFIX,
    ) -> None:
        super().__init__(dimension)
        self._root = Path(data_dir) / "namespaces"
        self._prefix = prefix
        self._workers = workers
        self._pool = ShardPool(self._open_shard, max_open_shards)
        self._records: dict[str, NamespaceRecord] = {}
        self._executor: ThreadPoolExecutor | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="qdrant-edge")
        self._records = await self._run(self._scan)

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._run(self._pool.close_all)
        self._executor.shutdown(wait=True)
        self._executor = None

    async def maintain(self) -> None:
        await self._run(self._maintain)

    async def ping(self) -> None:
        await self._run(self._check_writable)

    # -- namespaces ------------------------------------------------------------------

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        return self._records.get(name)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        await self._run(self._save_namespace, record)
        self._records[record.name] = record

    async def delete_namespace(self, name: str) -> bool:
        existed = await self._run(self._delete_namespace, name)
        self._records.pop(name, None)
        return existed

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return list(self._records.values())

    # -- memories --------------------------------------------------------------------

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        def read(shard: Any) -> MemoryRecord | None:
            found = shard.retrieve([memory_id], with_payload=True, with_vector=False)
            return memory_from_payload(memory_id, namespace, found[0].payload) if found else None

        return await self._with_shard(namespace, read, None)

    async def upsert_memory(self, memory: MemoryRecord, vector: Sequence[float]) -> None:
        point = qe.Point(memory.id, list(vector), memory_to_payload(memory))

        def write(shard: Any) -> bool:
            shard.update(qe.UpdateOperation.upsert_points([point]))
            return True

        if not await self._with_shard(memory.namespace, write, False, count_change=True):
            raise NamespaceGone(f"namespace {memory.namespace} not found")

    async def query_memories(
        self, namespace: str, vector: Sequence[float], memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(list(vector)),
            filter=edge_filter(memory_filter),
            with_payload=True,
            params=qe.SearchParams(exact=True),
        )

        def search(shard: Any) -> list[ScoredMemory]:
            return [
                ScoredMemory(memory_from_payload(str(p.id), namespace, p.payload), p.score)
                for p in shard.query(request)
            ]

        return await self._with_shard(namespace, search, [])

    async def list_memories(
        self, namespace: str, memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        request = qe.ScrollRequest(
            limit=limit,
            filter=edge_filter(memory_filter),
            with_payload=True,
            order_by=qe.OrderBy(FIELD_CREATED_US, direction=qe.Direction.Desc),
        )

        def scroll(shard: Any) -> list[MemoryRecord]:
            records, _next = shard.scroll(request)
            return [memory_from_payload(str(r.id), namespace, r.payload) for r in records]

        return await self._with_shard(namespace, scroll, [])

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        def delete(shard: Any) -> bool:
            if not shard.retrieve([memory_id], with_payload=False, with_vector=False):
                return False
            shard.update(qe.UpdateOperation.delete_points([memory_id]))
            return True

        return await self._with_shard(namespace, delete, False, count_change=True)

    async def delete_expired_memories(self, namespace: str, now: datetime) -> int:
        expired = qe.Filter(must=[_expired_by(now)])

        def sweep(shard: Any) -> int:
            count: int = shard.count(qe.CountRequest(filter=expired, exact=True))
            if count:
                shard.update(qe.UpdateOperation.delete_points_by_filter(expired))
            return count

        return await self._with_shard(namespace, sweep, 0, count_change=True)

    # -- blocking internals (worker threads only) -------------------------------------

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise BackendUnavailable("embedded store is not open")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, partial(func, *args))
        except BackendError:
            raise
        except OSError as error:  # disk full, permissions: the store cannot serve now
            raise BackendUnavailable(f"embedded store: {error}") from error
        except Exception as error:  # qdrant-edge raises plain exceptions
            raise BackendError(f"embedded store: {error}") from error

    async def _with_shard(
        self, namespace: str, func: Callable[[Any], T], missing: T, *, count_change: bool = False
    ) -> T:
        if namespace not in self._records:
            return missing
        path = self._dir(namespace) / SHARD_DIR

        def call() -> T:
            with self._pool.use(path) as entry:
                if entry is None:
                    return missing
                result = func(entry.shard)
                if count_change:
                    entry.changes_since_optimize += 1
                return result

        return await self._run(call)

    def _dir(self, namespace: str) -> Path:
        return self._root / naming.collection_name(namespace, self._prefix)

    def _open_shard(self, path: Path, create: bool) -> Any | None:
        if path.exists():
            return qe.EdgeShard.load(str(path))
        if not create:
            return None
        shard = qe.EdgeShard.create(str(path), edge_config(self.dimension))
        for field_name, schema in _INDEXES.items():
            shard.update(qe.UpdateOperation.create_field_index(field_name, schema))
        return shard

    def _scan(self) -> dict[str, NamespaceRecord]:
        self._root.mkdir(parents=True, exist_ok=True)
        records: dict[str, NamespaceRecord] = {}
        for directory in sorted(self._root.iterdir()):
            record_file = directory / RECORD_FILE
            if directory.name.startswith(TRASH_PREFIX) or not record_file.exists():
                log.warning("removing incomplete namespace directory %s", directory.name)
                shutil.rmtree(directory, ignore_errors=True)
                continue
            record = namespace_from_json(record_file.read_text(encoding="utf-8"))
            records[record.name] = record
        return records

    def _save_namespace(self, record: NamespaceRecord) -> None:
        directory = self._dir(record.name)
        record_file = directory / RECORD_FILE
        if record_file.exists():
            stored = json.loads(record_file.read_text(encoding="utf-8"))
            if stored["name"] != record.name:
                raise NamespaceConflict(f"{directory.name} holds namespace {stored['name']!r}")
        directory.mkdir(parents=True, exist_ok=True)
        with self._pool.use(directory / SHARD_DIR, create=True):
            pass
        _write_atomically(record_file, namespace_to_json(record))

    def _delete_namespace(self, name: str) -> bool:
        directory = self._dir(name)
        with self._pool.exclusive(directory / SHARD_DIR):
            if not directory.exists():
                return False
            trash = self._root / f"{TRASH_PREFIX}{uuid.uuid4().hex}"
            os.replace(directory, trash)
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def _check_writable(self) -> None:
        if not os.access(self._root, os.W_OK | os.X_OK):
            raise BackendUnavailable(f"data directory {self._root} is not writable")

    def _maintain(self) -> None:
        for path in self._pool.open_paths():
            with self._pool.use(path) as entry:
                if entry is None:
                    continue
                if entry.changes_since_optimize >= OPTIMIZE_AFTER_CHANGES:
                    entry.shard.optimize()
                    entry.changes_since_optimize = 0
                entry.shard.flush()
