"""Backends under test, started and closed around a block.

How each is built: `embedded_store(DIM, path, workers)` (the embedded store in its pool
of engine worker processes, as the server runs it) or `QdrantEdgeBackend(DIM, path)` (the
same store in the test's own process, where a test looks at its parts: `store`),
`QdrantServerBackend(DIM, location=":memory:")` or `QdrantCollectionsBackend(...)` directly,
and Pinecone through `harness.pinecone_backend.pinecone_backend` on the HTTP-level fake.
`point_count`: the embedded store's points, read from its shards. `made_once` and `copy_of`:
an empty store made once a session, and each test's copy of it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from typing import TypeVar

import pytest
import qdrant_edge as qe

from adapters.base import VectorBackend
from adapters.disk import sparse_copy
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.pool.engine_pool import EnginePool

Backend = TypeVar("Backend", bound=VectorBackend)


@asynccontextmanager
async def started(backend: Backend) -> AsyncIterator[Backend]:
    """`backend` after `start()`, closed when the block ends (whatever happens in it)."""
    await backend.start()
    try:
        yield backend
    finally:
        await backend.close()


def names_of_each_worker(store: EnginePool, count: int) -> list[list[str]]:
    """`count` namespace names per worker, by the store's own routing."""
    found: list[list[str]] = [[] for _ in store.workers]
    n = 0
    while min(map(len, found)) < count:
        name = f"workspace:w{n}"
        if len(found[store.route(name)]) < count:
            found[store.route(name)].append(name)
        n += 1
    return found


def point_count(store: QdrantEdgeBackend) -> int:
    """Points physically in the embedded store's open shards, whatever reads may see."""
    request = qe.CountRequest(filter=None, exact=True)
    return sum(int(shard.count(request)) for shard in store.store.shards.open_shards())


TEST_POOL_WORKERS = 2  # the engine workers of the pool the backend suite runs on


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], VectorBackend]
) -> Path:
    """A data directory holding the new, empty store `make` builds there, started once by
    the store itself and closed: tests that need an empty store start from a copy
    (`copy_of`), not from its shards created and synced again."""
    data = tmp_path_factory.mktemp(name) / "data"

    async def made() -> None:
        store = make(data)
        await store.start()
        await store.close()

    in_own_loop(made())
    return data


def in_own_loop(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to its end on an event loop of its own, whatever loop runs here (a
    session fixture's, a test's)."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, work).result()


def copy_of(made: Path, data_dir: Path) -> Path:
    """`data_dir`, holding a copy of the store `made` (sparse: its logs stay holes)."""
    shutil.copytree(made, data_dir, copy_function=sparse_copy)
    return data_dir
