"""Token vectors on every backend that keeps them: the rerank stage and the token index.

Subclassed next to `BackendSuite` by each Qdrant backend's test module (embedded, and
both server layouts in qdrant-client's local mode), with the same `backend` fixture.
Token vectors are small synthetic unit vectors, so MaxSim is known exactly: a memory
holding every query token scores MaxSim = the query's token count.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.base import VectorBackend
from adapters.qdrant.ranking import RERANK_WEIGHT
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import PackedTokens
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from adapters.values import TokenVectors
from adapters.values import VectorKind
from tests.backends.suite.hybrid import KEYWORDS
from tests.backends.suite.hybrid import NEAR
from tests.backends.suite.hybrid import QUERY_VECTOR
from tests.backends.suite.hybrid import missing
from tests.backends.suite.hybrid import write
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

QUESTION = "router ticket"
# Token vectors with their wordpieces' ids, as the model gives them (the store keeps both).
QUERY_TOKENS = PackedTokens(np.array([unit(1), unit(0, 1)], dtype=np.float32), np.array([7, 8]))
# Stored as float16 with an int8 copy for scoring: MaxSim comes back within this.
TOLERANCE = 0.02


def query(tokens: TokenVectors | None = None) -> SearchQuery:
    return SearchQuery(QUERY_VECTOR, KEYWORDS.query(QUESTION), tokens)


class RerankSuite:
    """`rerank` adds RERANK_WEIGHT x the mean MaxSim to the fused score; a memory without token
    vectors (a store being upgraded) keeps its fused score; the token index fills them in."""

    @pytest.fixture
    async def rerank_team(self, backend: VectorBackend) -> str:
        """An empty namespace (HybridSuite's `team` holds distractors)."""
        name = "team:rerank"
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
        return name

    async def test_rerank_adds_the_weighted_mean_max_sim_to_the_fused_score(
        self, backend: VectorBackend, rerank_team: str
    ) -> None:
        team = rerank_team
        matching = memory(team, content="the router ticket is XJ-4471")
        await backend.upsert_memory(
            matching, MemoryVectors(NEAR, KEYWORDS.document(matching.content), QUERY_TOKENS)
        )
        unrelated = memory(team, content="the router ticket was closed")
        await backend.upsert_memory(
            unrelated, MemoryVectors(NEAR, KEYWORDS.document(unrelated.content), [unit(0, 0, 1)])
        )
        untokenized = await write(backend, team, "a router ticket of the version before", NEAR)
        fused = {h.memory.id: h.score for h in await self.ask(backend, team, query())}
        reranked = {
            h.memory.id: h.score for h in await self.ask(backend, team, query(QUERY_TOKENS))
        }
        assert reranked[matching.id] - fused[matching.id] == pytest.approx(
            RERANK_WEIGHT, abs=TOLERANCE
        )  # MaxSim 2 over 2 query tokens: the mean is 1
        assert reranked[unrelated.id] - fused[unrelated.id] == pytest.approx(0, abs=TOLERANCE)
        assert reranked[untokenized.id] == pytest.approx(fused[untokenized.id])
        hits = await self.ask(backend, team, query(QUERY_TOKENS))
        assert hits[0].memory == matching

    async def ask(
        self, backend: VectorBackend, team: str, asked: SearchQuery
    ) -> list[ScoredMemory]:
        return await backend.query_memories([team], asked, everything(), 10)

    async def untokenized(self, backend: VectorBackend, page: int = 2) -> list[tuple[str, str]]:
        assert backend.vector_fill is not None
        return await missing(backend.vector_fill, VectorKind.TOKENS, page)

    async def test_the_token_index_fills_memories_without_and_spares_rewritten_ones(
        self, backend: VectorBackend, rerank_team: str
    ) -> None:
        team = rerank_team
        part = backend.vector_fill
        assert part is not None
        await part.prepare(VectorKind.TOKENS)
        older = [await write(backend, team, f"router ticket {n}", NEAR) for n in range(3)]
        await backend.upsert_memory(
            memory(team, content="kept"),
            MemoryVectors(NEAR, KEYWORDS.document("kept"), QUERY_TOKENS),
        )
        listed = await self.untokenized(backend)
        assert sorted(content for _, content in listed) == sorted(m.content for m in older)
        rewritten = memory(team, id=older[0].id, content="router ticket rewritten")
        document = KEYWORDS.document(rewritten.content)
        await backend.upsert_memory(rewritten, MemoryVectors(NEAR, document, QUERY_TOKENS))
        # what the listed content would have given
        stale = PackedTokens(np.array([unit(0, 0, 1)], dtype=np.float32), np.array([9]))
        items = [(key, stale) for key, _ in listed]
        assert await part.fill(VectorKind.TOKENS, items) == len(listed)
        assert await self.untokenized(backend) == []
        hits = {h.memory.id: h.score for h in await self.ask(backend, team, query(QUERY_TOKENS))}
        fused = {h.memory.id: h.score for h in await self.ask(backend, team, query())}
        assert hits[rewritten.id] - fused[rewritten.id] == pytest.approx(
            RERANK_WEIGHT, abs=TOLERANCE
        )  # its own token vectors, not the stale ones
        assert hits[older[1].id] - fused[older[1].id] == pytest.approx(0, abs=TOLERANCE)
