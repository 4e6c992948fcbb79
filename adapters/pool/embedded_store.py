"""The embedded store as the server holds it: its engine worker process, or several.

`embedded_store` pools the workers, `engine_workers` decides their count at start-up and
`edge_worker` builds one. See docs/backends.md, "The engine worker process".
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from adapters.disk import DEFAULT_HEADROOM_BYTES
from adapters.errors import BackendMisconfigured
from adapters.pool.engine_pool import EnginePool
from adapters.pool.engine_process import EngineProcess
from adapters.pool.engine_process import WorkerSpec
from adapters.pool.placement import finish
from adapters.pool.placement import move
from adapters.pool.placement import part_dir
from adapters.pool.placement import written_with
from adapters.qdrant import ranking
from adapters.store_files import SHARD_COUNT
from adapters.store_files import refuse_other_layouts
from adapters.store_files import worker_of
from adapters.store_options import ENGINE_BACKEND
from adapters.store_options import WRITE_DEADLINE_S
from adapters.store_options import StoreOptions
from adapters.values import Durability

log = logging.getLogger(__name__)
# What the workers split: the shards, evenly.
WORKER_COUNTS = tuple(n for n in range(1, SHARD_COUNT + 1) if SHARD_COUNT % n == 0)
# A default of more would cost memory the operator did not ask for (a process each).
MAX_DEFAULT_WORKERS = 4


def edge_worker(
    dimension: int,
    data_dir: Path,
    *,
    disk_headroom_bytes: int = DEFAULT_HEADROOM_BYTES,
    durability: Durability = "sync",
    partitions: int = 1,
    label: str = "engine worker",
    write_deadline_s: float = WRITE_DEADLINE_S,
    token_dimension: int | None = None,
) -> EngineProcess:
    """An engine worker process (adapters/pool/) that builds `QdrantEdgeBackend` over
    `data_dir` from these settings."""
    options = StoreOptions(
        dimension,
        Path(data_dir),
        token_dimension or dimension,
        durability,
        disk_headroom_bytes,
        write_deadline_s,
        partitions,
    )
    spec = WorkerSpec(
        ENGINE_BACKEND, options.sent(), Path(data_dir), ranking.QDRANT_SEARCH_MODES, ENGINE_BACKEND
    )
    return EngineProcess(spec, label)


def embedded_store(
    dimension: int,
    data_dir: Path,
    workers: int = 1,
    *,
    disk_headroom_bytes: int = DEFAULT_HEADROOM_BYTES,
    durability: Durability = "sync",
    write_deadline_s: float = WRITE_DEADLINE_S,
    token_dimension: int | None = None,
) -> EnginePool:
    """The embedded store under `data_dir` as a pool of `workers` engine workers
    (`engine_workers`); one worker is a pool of one, over the whole store.
    `write_deadline_s`: the writes' deadline, past which a sync waiting is health's concern."""

    def worker(k: int) -> EngineProcess:
        alone = workers == 1
        return edge_worker(
            dimension,
            part_dir(Path(data_dir), workers, k),
            disk_headroom_bytes=disk_headroom_bytes,
            durability=durability,
            partitions=workers,
            label="engine worker" if alone else f"engine worker {k}",
            write_deadline_s=write_deadline_s,
            token_dimension=token_dimension,
        )

    route = partial(worker_of, workers=workers)
    found = [worker(k) for k in range(workers)]
    return EnginePool(dimension, found, route, token_dimension)


def default_workers(cores: int) -> int:
    """One worker per two cores (the server process needs the others), as an even split,
    at most `MAX_DEFAULT_WORKERS`."""
    most = min(MAX_DEFAULT_WORKERS, max(1, cores // 2))
    return max(n for n in WORKER_COUNTS if n <= most)


def engine_workers(data_dir: Path, asked: int | None, cores: int) -> int:
    """How many engine workers serve the store under `data_dir`: `asked`, else as many as
    wrote it, else (a new store) `default_workers(cores)`. A store written with another
    count than `asked` is moved to it first, and a move a cut left is finished
    (placement.py); a move takes a moment, not a copy of the memories."""
    refuse_other_layouts(data_dir)
    if asked is not None and asked not in WORKER_COUNTS:
        raise BackendMisconfigured(f"MEMORY_PLUGIN_ENGINE_WORKERS must be one of {WORKER_COUNTS}")
    finish(data_dir)
    written = written_with(data_dir)
    if asked is not None and written is not None and asked != written:
        log.info("moving the embedded store from %d engine worker(s) to %d", written, asked)
        move(data_dir, written, asked)
        return asked
    return written or asked or default_workers(cores)
