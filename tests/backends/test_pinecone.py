"""The shared backend suite against `PineconeBackend`, through an HTTP-level fake of Pinecone.

Two runs of the same suite: one where Pinecone shows every write at once, and
one where nothing written during the test ever becomes visible to reads, so
every answer about fresh data has to come from the read-your-writes overlay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from adapters.base import MemoryRecord, VectorBackend
from adapters.pinecone import PineconeBackend
from adapters.pinecone.keywords import KEYWORD_WEIGHT
from tests.backend_suite import DIM, BackendSuite, cosine
from tests.hybrid_suite import FAR, KEYWORDS, QUERY_VECTOR, HybridSuite
from tests.pinecone_fake import FakePinecone, ManualClock


@pytest.fixture
def ticks() -> ManualClock:
    return ManualClock(1000.0)


def pinecone_backend(
    fake: FakePinecone, ticks: ManualClock, *, hybrid: bool = False, **overrides: float
) -> PineconeBackend:
    return PineconeBackend(
        DIM,
        api_key=fake.api_key,
        index_name=fake.name,
        clock=ticks,
        timeout_s=overrides.get("timeout_s", 1.0),
        freshness_window_s=overrides.get("freshness_window_s", 30.0),
        hybrid=hybrid,
    )


class TestPinecone(BackendSuite):
    @pytest.fixture
    def fake(self, ticks: ManualClock) -> Iterator[FakePinecone]:
        with FakePinecone(dimension=DIM, clock=ticks).mocked() as fake:
            yield fake

    @pytest.fixture
    async def backend(
        self, fake: FakePinecone, ticks: ManualClock
    ) -> AsyncIterator[PineconeBackend]:
        store = pinecone_backend(fake, ticks)
        await store.start()
        yield store
        await store.close()


class TestPineconeLagging(TestPinecone):
    """Pinecone never catches up during these tests: the overlay answers for fresh writes."""

    @pytest.fixture
    def fake(self, ticks: ManualClock) -> Iterator[FakePinecone]:
        with FakePinecone(dimension=DIM, clock=ticks, visibility_delay_s=3600).mocked() as fake:
            yield fake


class TestPineconeHybrid(BackendSuite, HybridSuite):
    """A dotproduct index: every memory's keyword vector is stored as its sparse values,
    and a hybrid search is Pinecone's sparse-dense query (adapters/pinecone/keywords.py)."""

    @pytest.fixture
    def fake(self, ticks: ManualClock) -> Iterator[FakePinecone]:
        with FakePinecone(dimension=DIM, clock=ticks, metric="dotproduct").mocked() as fake:
            yield fake

    @pytest.fixture
    async def backend(
        self, fake: FakePinecone, ticks: ManualClock
    ) -> AsyncIterator[PineconeBackend]:
        store = pinecone_backend(fake, ticks, hybrid=True)
        await store.start()
        yield store
        await store.close()

    async def hybrid_score(
        self, backend: VectorBackend, namespace: str, memory: MemoryRecord, text: str
    ) -> float:
        """Pinecone's: cosine plus the weighted sum of the memory's weights for the words."""
        stored = dict(
            zip(*(lambda v: (v.indices, v.values))(KEYWORDS.document(memory.content)), strict=True)
        )
        asked = KEYWORDS.query(text).indices
        return cosine(QUERY_VECTOR, FAR) + KEYWORD_WEIGHT * sum(stored.get(i, 0.0) for i in asked)


class TestPineconeHybridLagging(TestPineconeHybrid):
    """The same with nothing written during the test visible: the overlay scores alike."""

    @pytest.fixture
    def fake(self, ticks: ManualClock) -> Iterator[FakePinecone]:
        with FakePinecone(
            dimension=DIM, clock=ticks, metric="dotproduct", visibility_delay_s=3600
        ).mocked() as fake:
            yield fake
