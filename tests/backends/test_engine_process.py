"""The backend suite against the embedded store in its engine worker process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.qdrant.edge.engine_client import EngineClient
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite, KeywordIndexSuite
from tests.backends.suite.rerank import RerankSuite
from tests.support.backends import started
from tests.support.records import DIM


class TestEngineProcess(BackendSuite, HybridSuite, KeywordIndexSuite, RerankSuite):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[EngineClient]:
        async with started(EngineClient(DIM, tmp_path)) as store:
            yield store
