"""`MemoryService.ping`: health checks that arrive together share one backend check.

On the embedded store the check is a worker thread's call (the data directory's
disk); the backend's ping first waits at a gate on one of the store's worker threads,
so the tests see who joined a check and who started one. No sleeps as
synchronisation: the gate is a `threading.Event`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import BackendUnavailable
from adapters.keyword_encoder import KeywordEncoder
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from tests.support.encoders import GatedEncoder


@dataclass
class GatedCheck:
    """Counts the checks and holds each at the gate; then raises `failure`, if any."""

    gate: threading.Event = field(default_factory=threading.Event)
    calls: int = 0
    failure: Exception | None = None
    counted: threading.Condition = field(default_factory=threading.Condition)

    def reached(self, calls: int) -> bool:
        """Whether `calls` checks have started (waits up to 10 s for them)."""
        with self.counted:
            return self.counted.wait_for(lambda: self.calls >= calls, timeout=10)

    def __call__(self) -> None:
        with self.counted:
            self.calls += 1
            self.counted.notify_all()
        if not self.gate.wait(timeout=10):
            raise AssertionError("the test never opened the gate")
        if self.failure is not None:
            raise self.failure


@asynccontextmanager
async def gated_service(
    data_dir: Path, deadline_s: float
) -> AsyncIterator[tuple[MemoryService, GatedCheck]]:
    """A service over a real embedded store whose ping is held at a gate, then checks."""
    backend = QdrantEdgeBackend(3, data_dir)
    embedder = BatchingEmbedder(GatedEncoder())
    await backend.start()
    await embedder.start()
    check = GatedCheck()
    ping = backend.ping

    async def gated_ping() -> None:
        await backend.store.calls.worker(check)
        await ping()

    backend.ping = gated_ping  # type: ignore[method-assign]
    try:
        yield MemoryService(backend, embedder, KeywordEncoder(), deadline_s=deadline_s), check
    finally:
        check.gate.set()
        await embedder.close()
        await backend.close()


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[MemoryService, GatedCheck]]:
    async with gated_service(tmp_path, deadline_s=2.0) as service_and_check:
        yield service_and_check


async def reached(check: GatedCheck, calls: int) -> bool:
    return await asyncio.get_running_loop().run_in_executor(None, check.reached, calls)


async def test_fifty_health_checks_at_once_make_one_backend_check(
    gated: tuple[MemoryService, GatedCheck],
) -> None:
    service, check = gated
    pings = [asyncio.ensure_future(service.ping()) for _ in range(50)]
    assert await reached(check, 1)
    await asyncio.sleep(0)  # every ping has had its turn to start or join
    assert check.calls == 1
    check.gate.set()
    conditions = await asyncio.gather(*pings)
    assert {c.degraded for c in conditions} == {False}
    assert check.calls == 1

    await service.ping()  # after it finished: a fresh check, never the old answer
    assert check.calls == 2


async def test_a_failed_check_fails_every_caller_that_joined_it_and_is_not_kept(
    gated: tuple[MemoryService, GatedCheck],
) -> None:
    service, check = gated
    check.failure = BackendUnavailable("the data directory is not writable")
    pings = [asyncio.ensure_future(service.ping()) for _ in range(5)]
    assert await reached(check, 1)
    check.gate.set()
    outcomes = await asyncio.gather(*pings, return_exceptions=True)
    assert [str(o) for o in outcomes] == ["the data directory is not writable"] * 5
    assert check.calls == 1

    check.failure = None  # the disk is back: the next health check sees it
    condition = await service.ping()
    assert not condition.degraded
    assert check.calls == 2


async def test_a_caller_giving_up_leaves_the_check_to_the_others(
    gated: tuple[MemoryService, GatedCheck],
) -> None:
    service, check = gated
    leaving = asyncio.ensure_future(service.ping())
    staying = asyncio.ensure_future(service.ping())
    assert await reached(check, 1)
    leaving.cancel()
    await asyncio.gather(leaving, return_exceptions=True)
    check.gate.set()
    condition = await staying
    assert not condition.degraded
    assert check.calls == 1


async def test_a_check_past_the_deadline_is_not_joined_by_the_next_health_check(
    tmp_path: Path,
) -> None:
    async with gated_service(tmp_path, deadline_s=0.2) as (service, check):
        with pytest.raises(BackendUnavailable, match=r"no answer within 0\.2 s"):
            await service.ping()
        with pytest.raises(BackendUnavailable, match=r"no answer within 0\.2 s"):
            await service.ping()
        # The second pinged afresh beside the stuck one (its thread is still held).
        assert await reached(check, 2)
        assert check.calls == 2
