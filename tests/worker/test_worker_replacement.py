"""A worker's crash is a pause: a spare replaces it, calls made meanwhile wait for it a
moment, and calls in flight that may be sent twice are sent again, once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.errors import BackendUnavailable
from adapters.pool import engine_process
from adapters.pool.embedded_store import embedded_store
from adapters.pool.engine_pool import EnginePool
from adapters.pool.engine_process import EngineProcess
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.crashing_store import CRASH_ID
from harness.crashing_store import crashing_worker
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit
from tests.worker.test_engine_process import until

NS = "workspace:a"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EnginePool]:
    async with started(embedded_store(DIM, tmp_path, 1)) as pool:
        await pool.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
        (worker,) = pool.workers
        await until(lambda: worker.spare_pid is not None, 30)
        yield pool


def only(pool: EnginePool) -> EngineProcess:
    (worker,) = pool.workers
    return worker


async def test_calls_in_flight_at_a_crash_are_sent_again_where_that_is_safe(
    store: EnginePool,
) -> None:
    written = memory(NS)
    await store.upsert_memory(written, MemoryVectors(unit(1)))
    worker = only(store)
    assert worker.pid is not None
    spare = worker.spare_pid
    os.kill(worker.pid, signal.SIGSTOP)  # what it is sent now stays in flight
    lookup = asyncio.create_task(store.get_memory(NS, written.id))
    again = memory(NS, content="written again")
    upsert = asyncio.create_task(store.upsert_memory(again, MemoryVectors(unit(0, 1))))
    delete = asyncio.create_task(store.delete_memory(NS, written.id))
    await asyncio.sleep(0.1)
    os.kill(worker.pid, signal.SIGKILL)
    assert await lookup == written  # a read: sent again
    await upsert  # an upsert by id: sent again
    with pytest.raises(BackendUnavailable, match="stopped; it is restarting"):
        await delete  # its answer (deleted or not) would be wrong the second time
    assert worker.pid == spare  # the spare replaced it
    assert await store.get_memory(NS, again.id) == again
    assert await store.get_memory(NS, written.id) == written
    await until(lambda: worker.spare_pid not in (None, spare), 30)  # a new spare


async def test_a_call_made_while_the_worker_is_replaced_waits_for_it(
    store: EnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_process, "RESTART_WAIT_S", 30.0)  # the machine may be slow
    worker = only(store)
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    await until(lambda: not worker.up, 5)
    record = await store.get_namespace(NS)  # waits for the replacement, then answers
    assert record is not None
    assert worker.restarts == 1


async def test_a_call_waits_for_a_replacement_a_moment_only(
    store: EnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_process, "RESTART_WAIT_S", 0.3)
    worker = only(store)
    spare = worker.spare_pid
    assert worker.pid is not None
    assert spare is not None
    os.kill(spare, signal.SIGSTOP)  # the replacement will not be ready while stopped
    os.kill(worker.pid, signal.SIGKILL)
    await until(lambda: not worker.up, 5)
    started_at = time.monotonic()
    with pytest.raises(BackendUnavailable, match="restarting"):
        await store.get_namespace(NS)
    assert time.monotonic() - started_at < 0.3 + 0.5
    with pytest.raises(BackendUnavailable, match="restarting"):  # past the moment: at once
        await asyncio.wait_for(store.get_namespace(NS), 0.1)
    os.kill(spare, signal.SIGCONT)
    await until(lambda: worker.up, 30)
    assert await store.get_namespace(NS) is not None


async def test_a_call_that_kills_its_worker_twice_is_refused_and_the_worker_serves_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_process, "RESTART_WAIT_S", 30.0)  # the machine may be slow
    worker = crashing_worker(DIM, tmp_path)
    pool = EnginePool(DIM, [worker], lambda _: 0)
    async with started(pool):
        await pool.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
        kept = memory(NS)
        await pool.upsert_memory(kept, MemoryVectors(unit(1)))
        with pytest.raises(BackendUnavailable, match="stopped twice during this call"):
            await pool.get_memory(NS, CRASH_ID)
        await until(lambda: worker.up and worker.restarts == 2, 30)
        assert await pool.get_memory(NS, kept.id) == kept
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert (
            "a call was in flight at two crashes of the engine worker in a row; refused:"
            f" get_memory of {NS}"
        ) in errors
