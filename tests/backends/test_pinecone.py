"""The shared backend suite against `PineconeBackend`, through an HTTP-level fake of Pinecone.

Two runs of the same suite: one where Pinecone shows every write at once, and
one where nothing written during the test ever becomes visible to reads, so
every answer about fresh data has to come from the read-your-writes overlay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.base import VectorBackend
from adapters.pinecone import PineconeBackend
from adapters.pinecone.keywords import KEYWORD_WEIGHT
from adapters.values import MemoryRecord
from harness.clocks import ManualClock
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import FAR
from tests.backends.suite.hybrid import KEYWORDS
from tests.backends.suite.hybrid import QUERY_VECTOR
from tests.backends.suite.hybrid import HybridSuite
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import cosine


def suite_backend(
    fake: FakePinecone, ticks: ManualClock, *, hybrid: bool = False
) -> PineconeBackend:
    return pinecone_backend(
        fake, clock=ticks, timeout_s=1.0, freshness_window_s=30.0, hybrid=hybrid
    )


class TestPinecone(BackendSuite):
    @pytest.fixture
    async def backend(
        self, fake: FakePinecone, ticks: ManualClock
    ) -> AsyncIterator[PineconeBackend]:
        async with started(suite_backend(fake, ticks)) as store:
            yield store


class TestPineconeLagging(TestPinecone):
    """Pinecone never catches up during these tests: the overlay answers for fresh writes."""

    @pytest.fixture
    def pinecone_options(self) -> dict[str, Any]:
        return {"dimension": DIM, "visibility_delay_s": 3600}


class TestPineconeHybrid(BackendSuite, HybridSuite):
    """A dotproduct index: every memory's keyword vector is stored as its sparse values,
    and a hybrid search is Pinecone's sparse-dense query (adapters/pinecone/keywords.py)."""

    @pytest.fixture
    def pinecone_options(self) -> dict[str, Any]:
        return {"dimension": DIM, "metric": "dotproduct"}

    @pytest.fixture
    async def backend(
        self, fake: FakePinecone, ticks: ManualClock
    ) -> AsyncIterator[PineconeBackend]:
        async with started(suite_backend(fake, ticks, hybrid=True)) as store:
            yield store

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
    def pinecone_options(self) -> dict[str, Any]:
        return {"dimension": DIM, "metric": "dotproduct", "visibility_delay_s": 3600}
