"""Where embedded-engine calls run (edge/call_threads.py, `EngineCalls`), with real threads."""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import AsyncIterator

import pytest

from adapters.engine.call_threads import EngineCalls
from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceGone
from adapters.errors import StorageDamaged
from adapters.errors import StorageFull


@pytest.fixture
async def calls() -> AsyncIterator[EngineCalls]:
    engine = EngineCalls(workers=2)
    engine.start()
    yield engine
    engine.stop()


def thread_name() -> str:
    return threading.current_thread().name


async def test_a_short_call_runs_on_the_event_loop_when_nothing_is_in_flight(
    calls: EngineCalls,
) -> None:
    assert await calls.here(thread_name) == threading.current_thread().name
    assert (await calls.worker(thread_name)).startswith("qdrant-edge")


async def test_a_short_call_queues_on_a_worker_while_another_call_is_in_flight(
    calls: EngineCalls,
) -> None:
    release = threading.Event()
    entered = threading.Event()

    def long_call() -> str:
        entered.set()
        release.wait(5)
        return "long"

    long_task = asyncio.create_task(calls.worker(long_call))
    await asyncio.to_thread(entered.wait, 5)
    short_task = asyncio.create_task(calls.here(thread_name))
    await asyncio.sleep(0.05)
    release.set()
    assert await long_task == "long"
    assert (await short_task).startswith("qdrant-edge")
    # Once the worker call has returned, short calls run on the loop again.
    assert await calls.here(thread_name) == threading.current_thread().name


@pytest.mark.parametrize("path", ["here", "worker"])
async def test_failures_are_translated_alike_on_both_paths(calls: EngineCalls, path: str) -> None:
    def disk_full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device: /data/store/memories/wal")

    def engine_failure() -> None:
        raise RuntimeError("Service internal error: segment /data/store/x is damaged")

    def gone() -> None:
        raise NamespaceGone("namespace workspace:a not found")

    call = calls.here if path == "here" else calls.worker
    with pytest.raises(StorageFull) as full:
        await call(disk_full)
    assert "/data" not in str(full.value)
    assert isinstance(full.value.__cause__, OSError)
    with pytest.raises(StorageDamaged) as damaged:
        await call(engine_failure)
    assert "/data" not in str(damaged.value)
    with pytest.raises(NamespaceGone) as passed_through:
        await call(gone)
    assert passed_through.value.__cause__ is None


async def test_a_stopped_engine_answers_unavailable() -> None:
    engine = EngineCalls(workers=1)
    with pytest.raises(BackendUnavailable):
        await engine.here(thread_name)
    engine.start()
    engine.stop()
    with pytest.raises(BackendUnavailable):
        await engine.worker(thread_name)
