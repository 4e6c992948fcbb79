"""The embedded store's shards: each namespace lives in one of `SHARD_COUNT`, by a hash of its name.

Split so that a damaged shard takes down its own namespaces only; all are made when the store
opens. Why, and what it costs: docs/backends.md, "Embedded (default): qdrant-edge on disk".
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import TypeVar

import qdrant_edge as qe

from adapters import disk
from adapters.disk import DiskGuard
from adapters.disk import allocated_bytes
from adapters.disk import fsync_path
from adapters.disk import replace_file
from adapters.disk import sparse_copy
from adapters.disk import sync_trees
from adapters.engine.engine import INDEX_SCHEMAS
from adapters.engine.engine import add_vectors
from adapters.engine.engine import drop_other_tokens
from adapters.engine.engine import edge_config
from adapters.engine.engine import fatal
from adapters.errors import BackendUnavailable
from adapters.errors import StorageDamaged
from adapters.errors import StorageFull
from adapters.qdrant.layout import MEMORY_INDEXES
from adapters.qdrant.layout import TENANT_INDEXES
from adapters.store_files import SHARD_COUNT
from adapters.store_files import SHARDS_DIR
from adapters.store_files import local_index
from adapters.store_files import shard_index
from adapters.values import VectorKind

log = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG_FILE = "edge_config.json"  # the engine's own record of a shard's configuration
# A flush drops the log's closed segments but the last; the open one and that one stay. At
# the engine's default (32 MiB a segment) that is up to 64 MiB a shard of updates already in
# the segments, token vectors at three bytes a number: smaller segments, less held twice.
WAL_SEGMENT_BYTES = 1024 * 1024
WAL_OPTIONS = {"segment_capacity": WAL_SEGMENT_BYTES, "segment_queue_len": 0, "retain_closed": 1}


def open_shard(path: Path, dimension: int, token_dimension: int | None = None) -> Any:
    """Load the shard at `path` (or create it) with its log's segment size, its keyword and
    token vectors (of `token_dimension`; None: `dimension`) and every payload index. Only its
    configuration file sets the log's options: a new shard is created from that file alone,
    an existing one's file gains them before it loads."""
    token_dimension = token_dimension or dimension
    segments = path / "segments"
    existing = segments.is_dir() and any(segments.iterdir())
    config_file = path / CONFIG_FILE
    config = json.loads(config_file.read_text()) if config_file.is_file() else None
    if config is None and not existing:
        config = _created_config(path, dimension, token_dimension)
    if config is not None and config.get("wal_options") != WAL_OPTIONS:
        replace_file(config_file, json.dumps({**config, "wal_options": WAL_OPTIONS}))
    shard = qe.EdgeShard.load(str(path))
    if existing:
        drop_other_tokens(shard, (config or {}).get("vectors", {}), token_dimension)
        for vectors in VectorKind:
            add_vectors(shard, vectors, token_dimension)
    present = set(shard.info().payload_schema)
    for field_name, kind in {**TENANT_INDEXES, **MEMORY_INDEXES}.items():
        if field_name not in present:  # also heals a create cut short by a crash
            shard.update(qe.UpdateOperation.create_field_index(field_name, INDEX_SCHEMAS[kind]))
    disk.release(path, "/payload_index/")  # read whole to load, not read since
    return shard


def _created_config(path: Path, dimension: int, token_dimension: int) -> dict[str, Any]:
    """The configuration file the engine writes for a shard it creates (in a scratch
    directory beside `path`, removed after; a leftover is a `*.new` of `_create_missing`)."""
    scratch = path.with_name(f"{path.name}-config.new")
    shutil.rmtree(scratch, ignore_errors=True)
    qe.EdgeShard.create(str(scratch), edge_config(dimension, token_dimension)).close()
    config: dict[str, Any] = json.loads((scratch / CONFIG_FILE).read_text())
    shutil.rmtree(scratch)
    return config


class ShardSet:
    """The shards of one store; which are open, and why the others are not."""

    def __init__(
        self,
        root: Path,
        dimension: int,
        disk: DiskGuard,
        partitions: int = 1,
        token_dimension: int | None = None,
    ) -> None:
        """`partitions`: this store holds the namespaces of 1 / `partitions` of the
        `SHARD_COUNT` shards (an engine worker's among several), as shards of its own;
        `token_dimension`: each token vector's size (None: `dimension`), as `open_shard`."""
        self._root = root
        self._partitions = partitions
        self._dimension = dimension
        self.token_dimension = token_dimension or dimension
        self._disk = disk
        self._lock = threading.Lock()
        self.paths: list[Path] = []
        self.shards: list[Any | None] = []
        # Shards not open: damaged, or waiting for room (with the disk's message).
        self.damaged: set[int] = set()
        self.waiting_for_room: dict[int, str] = {}

    # -- opening ---------------------------------------------------------------------

    def open(self) -> None:
        sharded = self._root / SHARDS_DIR
        sharded.mkdir(exist_ok=True)
        self.paths = [sharded / f"{i:02d}" for i in range(SHARD_COUNT // self._partitions)]
        self._create_missing(sharded)
        self.shards = [None] * len(self.paths)
        for index in range(len(self.paths)):
            self._open_one(index)

    def _create_missing(self, sharded: Path) -> None:
        """Every shard not on disk yet, as a copy of one empty shard the engine creates; left
        to `_open_one` (which creates each, or waits for room) when the volume has no room."""
        for leftover in sharded.glob("*.new"):  # a creation cut short
            shutil.rmtree(leftover)
        missing = [
            path
            for path in self.paths
            if not (path / "segments").is_dir() and not (path / CONFIG_FILE).is_file()
        ]
        if not missing:
            return
        template = sharded / "template.new"
        try:
            self._disk.check()
            shard = open_shard(template, self._dimension, self.token_dimension)
            shard.flush()
            shard.close()
            self._disk.check(extra_bytes=allocated_bytes(template) * len(missing))
        except StorageFull:
            shutil.rmtree(template, ignore_errors=True)
            return
        copies = [path.with_name(f"{path.name}.new") for path in missing]
        for copy in copies:
            shutil.copytree(template, copy, copy_function=sparse_copy)
        sync_trees(copies)  # on disk before any is a shard: a write trusts its files
        for path, copy in zip(missing, copies, strict=True):
            shutil.rmtree(path, ignore_errors=True)  # an empty directory left by a crash
            copy.rename(path)
        shutil.rmtree(template)
        fsync_path(sharded)

    def _open_one(self, index: int) -> Any | None:
        """Open (or create) shard `index` unless the volume is too full (a SIGBUS)."""
        try:
            self._disk.check_open(self.paths[index])
        except StorageFull as full:
            if index not in self.waiting_for_room:
                log.error(
                    "memory shard %02d not opened (retried once there is room): %s", index, full
                )
            self.waiting_for_room[index] = str(full)
            return None
        self.waiting_for_room.pop(index, None)
        try:
            shard = open_shard(self.paths[index], self._dimension, self.token_dimension)
        except BaseException as error:
            if fatal(error):
                raise
            log.error("memory shard %02d could not be opened (damaged files): %s", index, error)
            self.damaged.add(index)
            return None
        self.shards[index] = shard
        return shard

    def retry_waiting(self) -> list[int]:
        """Open the shards a full volume kept closed, now that there may be room; those opened."""
        with self._lock:
            return [i for i in list(self.waiting_for_room) if self._open_one(i) is not None]

    def reopen(self, index: int) -> Any | None:
        """Close shard `index` and load it again from its files (upkeep.py says why): the new
        shard, or None when left as it was (not open, or no room to map its files again). One
        that does not load again is damaged, as at start."""
        with self._lock:
            shard = self.shards[index]
            if shard is None:
                return None
            try:
                self._disk.check_open(self.paths[index])
            except StorageFull:
                return None
            shard.flush()
            shard.close()
            self.shards[index] = None
            return self._open_one(index)

    def give_up(self, index: int, error: BaseException) -> None:
        """Take shard `index` out of service: it opened, but its indexes cannot be read (at
        start, it fails alone as one that does not open does, not the whole store)."""
        log.error("memory shard %02d could not be read (damaged files): %s", index, error)
        shard, self.shards[index] = self.shards[index], None
        self.damaged.add(index)
        if shard is not None:
            with contextlib.suppress(Exception):
                shard.close()

    def unopened(self) -> set[int]:
        """Shards on disk that do not serve: damaged, or waiting for room."""
        return self.damaged | set(self.waiting_for_room)

    # -- routing ---------------------------------------------------------------------

    def index_of(self, name: str) -> int:
        return local_index(shard_index(name, SHARD_COUNT), self._partitions)

    def of(self, name: str) -> Any:
        """The open shard of namespace `name`; raises what a caller of it should get."""
        index = self.index_of(name)
        shard = self.shards[index]
        if shard is not None:
            return shard
        if index in self.damaged:
            raise StorageDamaged(
                f"namespace {name} is unreadable: its part of the embedded store could not be"
                " opened (damaged files); see docs/repair.md#a-shard-does-not-open",
                (name,),
            )
        if index in self.waiting_for_room:
            raise StorageFull(self.waiting_for_room[index])
        raise BackendUnavailable("the embedded store is closed")

    def grouped(
        self, items: Iterable[T], name: Callable[[T], str]
    ) -> Iterator[tuple[Any, list[T]]]:
        """`items` by the shard of their namespace (`name`), each shard once, in turn; raises
        as `of` when it comes to one that does not serve."""
        groups: dict[int, list[T]] = {}
        for item in items:
            groups.setdefault(self.index_of(name(item)), []).append(item)
        for found in groups.values():
            yield self.of(name(found[0])), found

    def path_of(self, shard: Any) -> Path:
        """The directory of `shard`, one of the open shards."""
        for index, held in enumerate(self.shards):
            if held is shard:
                return self.paths[index]
        raise StorageDamaged("a write reached a shard that is no longer open")

    def open_shards(self) -> list[Any]:
        return [shard for shard in self.shards if shard is not None]

    def down(self, names: Iterable[str]) -> list[str]:
        """Those of `names` whose shard is damaged (they answer 503; health counts them)."""
        if not self.damaged:
            return []
        return [name for name in names if self.index_of(name) in self.damaged]

    @property
    def all_down(self) -> bool:
        """No shard serves and at least one is damaged: the store as a whole is down."""
        return bool(self.damaged) and not self.open_shards()

    def close(self) -> None:
        for index, shard in enumerate(self.shards):
            if shard is not None:
                shard.flush()
                shard.close()
                self.shards[index] = None
