"""A pool of one engine worker: what it answers while its worker is busy or down, and how
it builds the worker. The backend suite runs on the pool (test_engine_pool.py)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.pool.embedded_store import edge_worker
from adapters.pool.embedded_store import embedded_store
from adapters.pool.engine_pool import EnginePool
from adapters.pool.engine_process import EngineProcess
from adapters.pool.engine_process import WorkerSpec
from adapters.values import NamespaceRecord
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0


@contextmanager
def held(store: EnginePool) -> Iterator[None]:
    """The worker stopped (SIGSTOP) for the block: what it would answer, it answers later."""
    (worker,) = store.workers
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(worker.pid, signal.SIGCONT)


async def test_a_known_namespace_is_answered_while_the_engine_is_busy(tmp_path: Path) -> None:
    async with started(embedded_store(DIM, tmp_path, 1)) as store:
        record = NamespaceRecord(name="org:a", kind="org", created_at=T0)
        await store.save_namespace(record)
        with held(store):
            assert await asyncio.wait_for(store.get_namespace("org:a"), 1.0) == record
            both = store.get_namespaces(["org:a"])
            assert await asyncio.wait_for(both, 1.0) == {"org:a": record}


async def test_a_known_namespace_answers_unavailable_while_the_worker_is_down(
    tmp_path: Path,
) -> None:
    """A request over a namespace whose record the server holds is refused at its
    first step, not after the model has embedded its text for a store that is away."""
    async with started(embedded_store(DIM, tmp_path, 1)) as store:
        record = NamespaceRecord(name="org:a", kind="org", created_at=T0)
        await store.save_namespace(record)
        (worker,) = store.workers
        await until(lambda: worker.spare_pid is not None, 30)
        spare = worker.spare_pid
        assert worker.pid is not None
        assert spare is not None
        os.kill(spare, signal.SIGSTOP)  # no replacement ready: down past the wait
        os.kill(worker.pid, signal.SIGKILL)
        await until(lambda: not worker.up, 5)
        with pytest.raises(BackendUnavailable):
            await store.get_namespace("org:a")
        with pytest.raises(BackendUnavailable):
            await store.get_namespaces(["org:a"])
        os.kill(spare, signal.SIGCONT)
        await until(lambda: worker.up, 30)  # restarted: the record is read again
        assert await store.get_namespace("org:a") == record


async def until(condition: Callable[[], bool], timeout_s: float) -> None:
    """Poll `condition` every millisecond until it holds (TimeoutError after `timeout_s`)."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 (a property of another task's state)
            await asyncio.sleep(0.001)


async def test_a_record_read_as_it_is_deleted_is_not_kept(tmp_path: Path) -> None:
    record = NamespaceRecord(name="org:a", kind="org", created_at=T0)
    async with started(embedded_store(DIM, tmp_path, 1)) as store:
        await store.save_namespace(record)
    async with started(embedded_store(DIM, tmp_path, 1)) as store:  # knows no record yet
        with held(store):
            read = asyncio.create_task(store.get_namespace("org:a"))
            deleted = asyncio.create_task(store.delete_namespace("org:a"))
            await asyncio.sleep(0.05)
        assert await read == record  # the worker answered it before the delete
        assert await deleted is True
        assert await store.get_namespace("org:a") is None
        assert await store.get_namespaces(["org:a", "org:b"]) == {}


async def test_a_worker_named_something_that_is_not_a_backend_fails_its_start(
    tmp_path: Path,
) -> None:
    worker = EngineProcess(WorkerSpec("no-such-backend", {}, tmp_path, frozenset(), "none"))
    with pytest.raises(BackendMisconfigured) as failed:
        await worker.start()
    assert str(failed.value) == (
        "no backend is named 'no-such-backend' (known: embedded, qdrant-edge, qdrant,"
        " qdrant-collections, pinecone)"
    )
    await worker.close()
    assert worker.pid is not None
    assert not worker.up


async def test_a_worker_that_dies_while_opening_says_how_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its exit status (a signal: -7 a SIGBUS, -9 a kill) in the one error the start raises,
    and no second line when the server then closes it."""
    worker = edge_worker(DIM, tmp_path)
    opening = asyncio.create_task(worker.start())
    deadline = asyncio.get_running_loop().time() + 30
    while worker.pid is None:  # spawned: still importing, far from its store
        assert asyncio.get_running_loop().time() < deadline, "the worker was never spawned"
        await asyncio.sleep(0.001)
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(BackendUnavailable) as failed:
        await opening
    assert str(failed.value) == "the engine worker exited while opening the store (exit status -9)"
    caplog.clear()
    await worker.close()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


async def test_a_worker_hands_its_factory_the_options_as_given(tmp_path: Path) -> None:
    """The options travel as JSON on the worker's command line, and build the store."""
    worker = edge_worker(DIM, tmp_path / "elsewhere")
    await worker.start()
    try:
        await worker.call(None, "save_namespace", (NamespaceRecord("org:a", "org", T0),))
    finally:
        await worker.close()
    assert (tmp_path / "elsewhere" / "store" / "namespaces.sqlite3").exists()
    assert (tmp_path / "elsewhere" / "engine.lock").exists()
