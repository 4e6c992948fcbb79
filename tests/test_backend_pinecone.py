"""The shared backend suite against `PineconeBackend`, through an HTTP-level fake of Pinecone.

Two runs of the same suite: one where Pinecone shows every write at once, and
one where nothing written during the test ever becomes visible to reads, so
every answer about fresh data has to come from the read-your-writes overlay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from adapters.pinecone import PineconeBackend
from tests.backend_suite import DIM, BackendSuite
from tests.pinecone_fake import FakePinecone, ManualClock


@pytest.fixture
def ticks() -> ManualClock:
    return ManualClock(1000.0)


def pinecone_backend(fake: FakePinecone, ticks: ManualClock, **overrides: float) -> PineconeBackend:
    return PineconeBackend(
        DIM,
        api_key=fake.api_key,
        index_name=fake.name,
        clock=ticks,
        timeout_s=overrides.get("timeout_s", 1.0),
        freshness_window_s=overrides.get("freshness_window_s", 30.0),
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
