"""How a search with a query ranks, for every Qdrant layout and engine: one request per pin side.

Each mode's plan is decided here once, and each engine spells it through a `RankingDialect`.
Why: docs/backends.md, "Hybrid search" and "Reranking by token vectors".
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Generic
from typing import Protocol
from typing import TypeVar

from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import TokenVectors

# The named sparse vector holding each memory's keyword vector.
KEYWORDS_VECTOR = "keywords"
KEYWORD_WEIGHT = 0.03
CANDIDATES = 100
# The named multivector holding each memory's token vectors, and the rerank stage.
TOKENS_VECTOR = "tokens"
RERANK_DEPTH = 75
RERANK_WEIGHT = 4.0
QDRANT_SEARCH_MODES = frozenset(SearchMode)

Q = TypeVar("Q")  # a query vector, as the engine takes it
P = TypeVar("P")  # a prefetch stage
R = TypeVar("R", covariant=True)  # a request
F = TypeVar("F", contravariant=True)  # a filter
E = TypeVar("E")  # a formula expression
K = TypeVar("K", bound=Hashable)  # a point's id


class RankingDialect(Protocol, Generic[Q, P, R, F, E]):
    """How one engine spells the stages of a search."""

    def dense_query(self, vector: Sequence[float]) -> Q: ...

    def keyword_query(self, vector: SparseVector) -> Q: ...

    def dense(self, query: Q, limit: int, where: F) -> P:
        """The nearest by cosine among what `where` admits."""
        ...

    def keywords(self, query: Q, limit: int, where: F) -> P:
        """The best by BM25 among what `where` admits (only memories sharing a word)."""
        ...

    def token_query(self, vectors: TokenVectors) -> Q: ...

    def rescore(self, query: Q, candidates: list[P], limit: int) -> P:
        """The candidates of `candidates`, scored by `query` (dense, or token vectors)."""
        ...

    def formula(self, stages: list[P], formula: E, defaults: dict[str, float], limit: int) -> P:
        """A stage scoring `stages`' candidates by `formula`."""
        ...

    def alone(self, stage: P) -> R:
        """A request answering with one stage's own ranking."""
        ...

    def fused(self, stages: list[P], formula: E, defaults: dict[str, float], limit: int) -> R: ...

    def score(self, index: int) -> E: ...

    def constant(self, value: float) -> E: ...

    def add(self, terms: list[E]) -> E: ...

    def multiply(self, factors: list[E]) -> E: ...


def requests(
    dialect: RankingDialect[Q, P, R, F, E],
    query: SearchQuery,
    wheres: list[F],
    limit: int,
    mass: float | None = None,
) -> list[R]:
    """One engine request per filter (pin side) ranking it for `query`, for one batch;
    `mass`, the weights' sum where the query's token vectors are weighed (wordpieces.py)."""
    dense = None if query.dense is None else dialect.dense_query(query.dense)
    keywords = None if query.keywords is None else dialect.keyword_query(query.keywords)
    if keywords is None:
        assert dense is not None  # SearchQuery holds one at least
        return [dialect.alone(dialect.dense(dense, limit, where)) for where in wheres]
    if dense is None:
        return [dialect.alone(dialect.keywords(keywords, limit, where)) for where in wheres]
    pool = max(limit, CANDIDATES)
    # $score[0]: the cosine of every candidate; $score[1]: BM25 in the keyword list.
    formula = _weighted(dialect, KEYWORD_WEIGHT)
    defaults = {"$score[0]": -1.0, "$score[1]": 0.0}
    fused = []
    for where in wheres:
        by_keywords = dialect.keywords(keywords, pool, where)
        candidates = [dialect.dense(dense, pool, where), by_keywords]
        stages = [dialect.rescore(dense, candidates, 2 * pool), by_keywords]
        if not query.tokens:
            fused.append(dialect.fused(stages, formula, defaults, limit))
            continue
        depth = max(limit, RERANK_DEPTH)
        first = dialect.formula(stages, formula, defaults, depth)
        by_tokens = dialect.rescore(
            dialect.token_query(query.tokens),
            [dialect.formula(stages, formula, defaults, depth)],
            depth,
        )
        # $score[0]: the fused score; $score[1]: MaxSim (0 without token vectors).
        weight = rerank_weight(float(len(query.tokens)) if mass is None else mass)
        fused.append(dialect.fused([first, by_tokens], _weighted(dialect, weight), defaults, limit))
    return fused


def rerank_weight(mass: float) -> float:
    """MaxSim's weight for query token vectors of `mass`: their count, or the sum of their
    scales where they are weighed (wordpieces.py); the mean's, above."""
    return RERANK_WEIGHT / mass


def reranked(
    candidates: Sequence[tuple[K, float]], max_sim: Mapping[K, float], mass: float, limit: int
) -> list[tuple[K, float]]:
    """The `limit` best of `candidates` (key, fused score) by the rerank's score above,
    for an engine that asks MaxSim in a request of its own (edge/search_passes.py), of
    query token vectors of `mass` (`rerank_weight`); a key missing from `max_sim` (no token
    vectors yet) scores MaxSim 0."""
    weight = rerank_weight(mass)
    scored = [(key, fused + weight * max_sim.get(key, 0.0)) for key, fused in candidates]
    scored.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep the fused order
    return scored[:limit]


def _weighted(dialect: RankingDialect[Q, P, R, F, E], weight: float) -> E:
    """$score[0] + weight * $score[1]."""
    return dialect.add(
        [dialect.score(0), dialect.multiply([dialect.constant(weight), dialect.score(1)])]
    )
