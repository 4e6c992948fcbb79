"""The backend suite against both Qdrant server layouts in qdrant-client's local mode.

Local mode needs no server, so this runs everywhere: the shared layout
(`QdrantServerBackend`) and the `collections` layout. What the shared layout
promises beyond the suite is in tests/qdrant/local/, what only a real server
does (HTTP errors, request shapes, payload indexes) in tests/qdrant/http/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.errors import BackendMisconfigured
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import SearchMode
from plugin.core.search_mode import Ranking
from plugin.core.search_mode import choose_ranking
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite
from tests.backends.suite.hybrid import KeywordFillSuite
from tests.backends.suite.rerank import RerankSuite
from tests.support.backends import started
from tests.support.records import DIM


class TestQdrantServerInMemory(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[QdrantServerBackend]:
        async with started(QdrantServerBackend(DIM, location=":memory:")) as backend:
            yield backend


class TestQdrantCollectionsInMemory(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[QdrantCollectionsBackend]:
        async with started(QdrantCollectionsBackend(DIM, location=":memory:")) as backend:
            yield backend


@pytest.mark.parametrize("layout", [QdrantServerBackend, QdrantCollectionsBackend])
async def test_a_server_reranks_but_has_no_keyword_feedback(
    layout: type[QdrantServerBackend | QdrantCollectionsBackend],
) -> None:
    """Keyword feedback is a second pass of the embedded store's reads: on a server the
    mode stops start-up with one line (plugin/core/search_mode.py); rerank is answered."""
    async with started(layout(DIM, location=":memory:")) as backend:
        modes = backend.search_modes
        assert {SearchMode.RERANK, SearchMode.HYBRID, SearchMode.DENSE, SearchMode.KEYWORD} == modes
        assert choose_ranking("rerank", backend) == Ranking(SearchMode.RERANK)
        with pytest.raises(BackendMisconfigured, match="MEMORY_PLUGIN_SEARCH=feedback"):
            choose_ranking("feedback", backend)
        assert choose_ranking(None, backend) == Ranking(SearchMode.RERANK, SearchMode.HYBRID)
