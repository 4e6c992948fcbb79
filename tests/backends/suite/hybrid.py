"""Keyword vectors on every backend that keeps them: hybrid and keyword ranking, the keyword index.

Subclassed next to `BackendSuite` by each Qdrant backend's test module, with the same
`backend` fixture. Dense vectors are small synthetic ones, placed so that the dense
ranking misses what the words find (as the model does at scale, docs/backends.md "Hybrid
search"); keyword vectors come from the plugin's real encoder.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.parts import VectorFill
from adapters.qdrant.ranking import KEYWORD_WEIGHT
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import VectorKind
from tests.support.records import T0
from tests.support.records import cosine
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

KEYWORDS = KeywordEncoder()
QUERY_VECTOR = unit(1)
# Cosine 0.51 to the query: what the dense ranking prefers.
NEAR = unit(1, 1.7)
# Cosine 0.45: the memory the words are about, which the dense ranking puts last.
FAR = unit(1, 2.0)
DISTRACTORS = [
    "the support team answers tickets within a day",
    "the router was replaced by the provider last year",
    "tickets about billing go to the finance team",
    "the user prefers chat support over phone calls",
    "a ticket usually takes three days to resolve",
    "the status page lists every open incident",
]


def hybrid(text: str, vector: list[float] = QUERY_VECTOR) -> SearchQuery:
    return SearchQuery(dense=vector, keywords=KEYWORDS.query(text))


def keyword(text: str) -> SearchQuery:
    return SearchQuery(keywords=KEYWORDS.query(text))


async def missing(part: VectorFill, kind: VectorKind, page: int) -> list[tuple[str, str]]:
    """Every memory `part` finds without vectors of `kind`, walked a `page` at a time."""
    found, cursor = await part.missing(kind, None, page)
    while cursor is not None:
        more, cursor = await part.missing(kind, cursor, page)
        found += more
    return found


async def write(
    backend: VectorBackend, namespace: str, content: str, vector: list[float], **fields: object
) -> MemoryRecord:
    """Store a memory as the plugin does: its keyword vector beside its dense one."""
    written = memory(namespace, content=content, **fields)
    await backend.upsert_memory(written, MemoryVectors(vector, KEYWORDS.document(content)))
    return written


def queries(backend: VectorBackend, text: str) -> list[SearchQuery]:
    """The keyword-bearing searches the backend answers: hybrid, and keyword alone if it can."""
    found = [hybrid(text)]
    if SearchMode.KEYWORD in backend.search_modes:
        found.append(keyword(text))
    return found


class HybridSuite:
    """Ranking by keywords, alone and fused, under the same rules as dense ranking.

    `hybrid_score` is the backend's fusion: cosine plus weighted BM25 on Qdrant."""

    async def hybrid_score(
        self, backend: VectorBackend, namespace: str, memory: MemoryRecord, text: str
    ) -> float:
        by_keyword = await backend.query_memories([namespace], keyword(text), everything(), 1)
        assert by_keyword[0].memory == memory
        return cosine(QUERY_VECTOR, FAR) + KEYWORD_WEIGHT * by_keyword[0].score

    @pytest.fixture
    async def team(self, backend: VectorBackend) -> str:
        name = "team:support"
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
        for content in DISTRACTORS:
            await write(backend, name, content, NEAR)
        return name

    async def test_answers_hybrid_and_dense(self, backend: VectorBackend) -> None:
        assert {"hybrid", "dense"} <= set(backend.search_modes)

    @pytest.mark.parametrize(
        ("content", "question"),
        [
            ("we painted the living room, and the router ticket is XJ-4471", "ticket XJ-4471"),
            ("the kids loved the museum; Quennik Vasquez joined us", "did Quennik come?"),
        ],
        ids=["order number", "person's name"],
    )
    async def test_a_rare_token_the_dense_ranking_misses_is_found(
        self, backend: VectorBackend, team: str, content: str, question: str
    ) -> None:
        target = await write(backend, team, content, FAR)
        dense = await backend.query_memories([team], SearchQuery(QUERY_VECTOR), everything(), 10)
        assert dense[-1].memory == target  # the dense ranking puts it last
        for query in queries(backend, question):
            found = await backend.query_memories([team], query, everything(), 3)
            assert found[0].memory == target, query

    async def test_keyword_search_returns_only_what_shares_a_word(
        self, backend: VectorBackend, team: str
    ) -> None:
        if SearchMode.KEYWORD not in backend.search_modes:
            pytest.skip(f"the {backend.name} backend has no keyword-only search")
        found = await backend.query_memories([team], keyword("ticket resolve"), everything(), 10)
        contents = [hit.memory.content for hit in found]
        assert set(contents) == {DISTRACTORS[0], DISTRACTORS[2], DISTRACTORS[4]}
        assert contents[0] == DISTRACTORS[4]  # both words
        assert all(hit.score > 0 for hit in found)
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
        nothing = await backend.query_memories([team], keyword("zebra"), everything(), 10)
        assert nothing == []

    async def test_the_hybrid_score_is_cosine_plus_weighted_bm25(
        self, backend: VectorBackend, team: str
    ) -> None:
        target = await write(backend, team, "ticket XJ-4471 was escalated", FAR)
        found = await backend.query_memories([team], hybrid("XJ-4471"), everything(), 10)
        scores = {hit.memory.content: hit.score for hit in found}
        expected = await self.hybrid_score(backend, team, target, "XJ-4471")
        assert scores[target.content] == pytest.approx(expected, abs=1e-4)
        # No word in common: the cosine alone.
        assert scores[DISTRACTORS[1]] == pytest.approx(cosine(QUERY_VECTOR, NEAR), abs=1e-4)

    async def test_pinned_first_kinds_and_expiry_hold_under_hybrid(
        self, backend: VectorBackend, team: str
    ) -> None:
        other = "org:acme"
        await backend.save_namespace(NamespaceRecord(name=other, kind="org", created_at=T0))
        pinned = await write(backend, other, "pinned note about lunch", unit(-1), pin=True)
        summary = await write(backend, team, "ticket XJ-4471 summary", FAR, kind="summary")
        await write(
            backend, team, "ticket XJ-4471 expired", NEAR, expires_at=T0 - timedelta(seconds=1)
        )
        await write(backend, "org:acme", "ticket XJ-4471 checkpoint", FAR, kind="checkpoint")
        asked = [team, other, "org:missing"]
        found = await backend.query_memories(asked, hybrid("XJ-4471"), everything(), 10)
        assert found[0].memory == pinned  # pinned first, whatever its score
        contents = [h.memory.content for h in found]
        assert {"ticket XJ-4471 summary", "ticket XJ-4471 checkpoint"} <= set(contents)
        assert "ticket XJ-4471 expired" not in contents
        only = MemoryFilter(now=T0, kinds=frozenset({"summary"}))
        summaries = await backend.query_memories(asked, hybrid("XJ-4471"), only, 10)
        assert [h.memory for h in summaries] == [summary]
        unpinned = MemoryFilter(now=T0, pinned=False)
        rest = await backend.query_memories(asked, hybrid("lunch XJ-4471"), unpinned, 10)
        assert pinned not in [h.memory for h in rest]
        assert len(rest) == len(DISTRACTORS) + 2

    async def test_a_recreated_namespace_never_shows_old_memories(
        self, backend: VectorBackend, team: str
    ) -> None:
        await write(backend, team, "old ticket XJ-4471", FAR)
        assert await backend.delete_namespace(team) is True
        await backend.save_namespace(NamespaceRecord(name=team, kind="team", created_at=T0))
        for query in queries(backend, "XJ-4471"):
            assert await backend.query_memories([team], query, everything(), 10) == []
        again = await write(backend, team, "new ticket XJ-4471", FAR)
        await backend.maintain()
        for query in queries(backend, "XJ-4471"):
            found = await backend.query_memories([team], query, everything(), 10)
            assert [h.memory for h in found] == [again]


class KeywordFillSuite:
    """The adapter side of plugin/upgrades/vector_fill.py for keyword vectors: find memories
    without one, give them one, and never overwrite the vector of a memory rewritten meanwhile."""

    def part(self, backend: VectorBackend) -> VectorFill:
        assert backend.vector_fill is not None
        return backend.vector_fill

    async def unindexed(self, backend: VectorBackend, page: int = 3) -> list[tuple[str, str]]:
        return await missing(self.part(backend), VectorKind.KEYWORDS, page)

    async def test_memories_written_without_keywords_are_found_and_indexed(
        self, backend: VectorBackend
    ) -> None:
        await self.part(backend).prepare(VectorKind.KEYWORDS)
        names = ["team:a", "team:b"]
        contents = {}
        for name in names:
            await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
            for word in ("alpha", "bravo", "charlie", "delta"):
                written = memory(name, content=f"{name} order {word}")
                await backend.upsert_memory(
                    written, MemoryVectors(NEAR)
                )  # an older writer: no keywords
                contents[written.content] = written
        await write(backend, names[0], "already indexed", NEAR)
        pending = await self.unindexed(backend)
        assert sorted(content for _, content in pending) == sorted(contents)
        assert await backend.query_memories(names, keyword("charlie"), everything(), 10) == []
        items = [(key, KEYWORDS.document(content)) for key, content in pending]
        assert await self.part(backend).fill(VectorKind.KEYWORDS, items) == len(items)
        assert await self.unindexed(backend) == []
        found = await backend.query_memories(names, keyword("charlie"), everything(), 10)
        assert {h.memory.content for h in found} == {"team:a order charlie", "team:b order charlie"}

    async def test_a_memory_rewritten_meanwhile_keeps_its_new_keywords(
        self, backend: VectorBackend
    ) -> None:
        await self.part(backend).prepare(VectorKind.KEYWORDS)
        name = "team:race"
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
        old = memory(name, content="ticket alpha")
        await backend.upsert_memory(old, MemoryVectors(NEAR))
        gone = memory(name, content="ticket bravo, deleted meanwhile")
        await backend.upsert_memory(gone, MemoryVectors(NEAR))
        listed = await self.unindexed(backend)
        rewritten = memory(name, id=old.id, content="ticket charlie")
        await backend.upsert_memory(
            rewritten, MemoryVectors(NEAR, KEYWORDS.document(rewritten.content))
        )
        assert await backend.delete_memory(name, gone.id) is True
        await self.part(backend).fill(
            VectorKind.KEYWORDS, [(key, KEYWORDS.document(text)) for key, text in listed]
        )
        assert await backend.query_memories([name], keyword("alpha"), everything(), 10) == []
        found = await backend.query_memories([name], keyword("charlie"), everything(), 10)
        assert [h.memory for h in found] == [rewritten]

    async def test_reset_drops_every_keyword_vector(self, backend: VectorBackend) -> None:
        await self.part(backend).prepare(VectorKind.KEYWORDS)
        name = "team:reset"
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
        written = await write(backend, name, "ticket XJ-4471", NEAR)
        await self.part(backend).prepare(VectorKind.KEYWORDS, reset=True)
        assert await backend.query_memories([name], keyword("XJ-4471"), everything(), 10) == []
        pending = await self.unindexed(backend)
        assert [content for _, content in pending] == ["ticket XJ-4471"]
        await self.part(backend).prepare(VectorKind.KEYWORDS)  # idempotent: drops nothing
        assert await self.unindexed(backend) == pending
        await self.part(backend).fill(
            VectorKind.KEYWORDS, [(key, KEYWORDS.document(text)) for key, text in pending]
        )
        found = await backend.query_memories([name], keyword("XJ-4471"), everything(), 10)
        assert [h.memory for h in found] == [written]
