"""The embedded store's rerank (edge/search_passes.py, `reranked_search`): MaxSim asked by
id over the search's fused top RERANK_DEPTH, scored as `ranking.reranked` says.

Real embedded store, real keyword vectors; dense and token vectors are small seeded
random unit vectors, so rankings are rich but reproducible.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant import ranking
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from adapters.values import TokenVectors
from tests.support.backends import started
from tests.support.edge_plans import full_filter_answer
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

KEYWORDS = KeywordEncoder()
WORDS = [
    "router",
    "ticket",
    "firmware",
    "lake",
    "lunch",
    "zorbel",
    "crash",
    "fix",
    "team",
    "office",
    "review",
    "printer",
]


def test_reranked_adds_the_weighted_mean_max_sim_and_keeps_the_fused_order_on_ties() -> None:
    candidates = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.8)]
    max_sim = {"b": 2.0, "c": 0.0, "d": 0.0}  # "a" has no token vectors: MaxSim 0
    weight = ranking.RERANK_WEIGHT / 4
    assert ranking.reranked(candidates, max_sim, 4, 3) == [
        ("b", pytest.approx(0.9 + weight * 2.0)),
        ("a", 1.0),
        ("c", 0.8),
    ]
    assert ranking.reranked([], {}, 4, 3) == []


def _random_unit(rng: random.Random) -> list[float]:
    return unit(*(rng.gauss(0, 1) for _ in range(DIM)))


def _tokens(rng: random.Random) -> TokenVectors:
    return [_random_unit(rng) for _ in range(rng.randint(1, 5))]


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
    async with started(QdrantEdgeBackend(DIM, tmp_path)) as store:
        yield store


async def _fill(
    store: QdrantEdgeBackend, name: str, count: int, rng: random.Random
) -> dict[str, TokenVectors]:
    """`count` memories in a new namespace, one in seven pinned: their token vectors by id."""
    await store.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
    stored = {}
    for n in range(count):
        content = " ".join(rng.sample(WORDS, 3)) + f" note {n}"
        written = memory(name, content=content, pin=n % 7 == 0)
        stored[written.id] = _tokens(rng)
        document = KEYWORDS.document(content)
        await store.upsert_memory(
            written, MemoryVectors(_random_unit(rng), document, stored[written.id])
        )
    return stored


def _query(rng: random.Random, *, feedback: bool = False) -> SearchQuery:
    text = " ".join(rng.sample(WORDS, 2))
    return SearchQuery(_random_unit(rng), KEYWORDS.query(text), _tokens(rng), feedback=feedback)


async def test_one_namespace_ranks_by_fused_score_plus_the_weighted_max_sim(
    backend: QdrantEdgeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused top RERANK_DEPTH per pin side, reranked by MaxSim computed here from the
    stored token vectors: same ids, same scores (within the byte codes' rounding), pinned
    first."""
    monkeypatch.setattr(ranking, "RERANK_DEPTH", 12)  # deeper than the limit, not the store
    rng = random.Random(7)
    stored = await _fill(backend, "team:one", 60, rng)
    limit, ordered = 5, 0
    for _ in range(20):
        asked = _query(rng)
        expected = await _exact(backend, ["team:one"], asked, stored, 12, limit)
        found = await backend.query_memories(["team:one"], asked, everything(), limit)
        assert [hit.score for hit in found] == pytest.approx(
            [score for _, score in expected[:limit]], abs=TOLERANCE
        )
        clear = _clear_order(expected[:limit])
        assert [hit.memory.id for hit in found][:clear] == [key for key, _ in expected[:clear]]
        ordered += clear
    assert ordered >= 50  # most of the answers' order is checked, not only their scores


async def _exact(
    backend: QdrantEdgeBackend,
    names: list[str],
    asked: SearchQuery,
    stored: dict[str, TokenVectors],
    depth: int,
    limit: int,
) -> list[tuple[str, float]]:
    """Per pin side (pinned first), its fused top `depth` reranked by exact MaxSim."""
    assert asked.tokens is not None
    fused = await backend.query_memories(
        names, SearchQuery(asked.dense, asked.keywords), everything(), 1000
    )
    expected: list[tuple[str, float]] = []
    for pinned in (True, False):
        side = [hit for hit in fused if hit.memory.pin is pinned][:depth]
        exact = [(h.memory.id, h.score + _max_sim(asked.tokens, stored[h.memory.id])) for h in side]
        expected += sorted(exact, key=lambda pair: pair[1], reverse=True)[:limit]
    return expected


def _clear_order(expected: list[tuple[str, float]]) -> int:
    """How many of `expected` lead with their order beyond the codes' rounding: each score
    apart from the next by more than TOLERANCE (a pin side's change ends it too)."""
    for n in range(len(expected) - 1):
        if abs(expected[n][1] - expected[n + 1][1]) <= TOLERANCE:
            return n
    return len(expected)


async def test_the_depth_is_the_searchs_across_shards(
    backend: QdrantEdgeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over namespaces in different shards, MaxSim reranks the best RERANK_DEPTH of all
    their fused candidates per pin side (not each shard's own), scored as
    `ranking.reranked` says: checked against MaxSim computed here from the stored
    token vectors (the store scores their byte codes: scores within TOLERANCE)."""
    depth = 6
    monkeypatch.setattr(ranking, "RERANK_DEPTH", depth)
    shards = backend.store.shards
    first = "team:a"
    second = next(
        name
        for name in (f"team:b{n}" for n in range(100))
        if shards.index_of(name) != shards.index_of(first)
    )
    rng = random.Random(11)
    stored = await _fill(backend, first, 30, rng) | await _fill(backend, second, 30, rng)
    limit, differs = 4, 0
    for _ in range(15):
        asked = _query(rng)
        expected = await _exact(backend, [first, second], asked, stored, depth, limit)
        found = await backend.query_memories([first, second], asked, everything(), limit)
        assert [hit.score for hit in found] == pytest.approx(
            [score for _, score in expected[:limit]], abs=TOLERANCE
        )
        by_id = dict(expected)
        assert all(hit.memory.id in by_id for hit in found)
        per_shard = await full_filter_answer(backend, [first, second], asked, everything(), limit)
        differs += [hit.memory.id for hit in per_shard] != [hit.memory.id for hit in found]
    assert differs  # each shard reranking its own top `depth` would have answered otherwise


TOLERANCE = 0.03


def _max_sim(query: TokenVectors, stored: TokenVectors) -> float:
    """The rerank's added score: the weight times the sum of each query token's best cosine."""
    best = [max(sum(a * b for a, b in zip(q, d, strict=True)) for d in stored) for q in query]
    return ranking.rerank_weight(len(query)) * sum(best)
