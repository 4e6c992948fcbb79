"""How a search with a query ranks, for every Qdrant layout and engine: one request per pin side.

Dense: cosine over the embeddings. Keyword: BM25 over the keyword vectors (the
store applies IDF). Hybrid, fused inside the engine in the same one request:

    candidates = top CANDIDATES by cosine, and top CANDIDATES by BM25
    score      = cosine + KEYWORD_WEIGHT * BM25

Every candidate's cosine is computed (one stage re-scores both lists by the
dense vector); its BM25 is the keyword list's, and 0 for a candidate outside
it (a weak keyword match at best).

Why (measured on LoCoMo's development half, benchmarks/README.md):
- rank fusion (RRF, any k or weights) and DBSF either lost to BM25 alone at the
  top rank or to dense alone deep in the list; a weighted sum of the two scores
  did neither and recalled the most at every k;
- a candidate found by BM25 alone must get its real cosine: counting it as
  "cosine 0" lost recall at the top ranks;
- the BM25 of the dense candidates beyond the keyword list would add recall
  deep in the list (little at the top), but the engine must search once more or
  much deeper for it, doubling its time and missing the search latency target.
  Not worth it.

Keyword feedback (`SearchQuery.feedback`): the same plan twice, the
second time with the keyword query widened by the first's top results
(adapters/qdrant/feedback.py; the embedded store's passes: edge/feedback_passes.py).

Rerank (`SearchMode.RERANK`): the fused ranking's top RERANK_DEPTH,
reranked by late interaction over the model's token vectors (the multivector
`TOKENS_VECTOR`, compared by MaxSim), in the same request on a Qdrant server:

    score = fused + RERANK_WEIGHT * MaxSim / (the query's token count)

Qdrant's MaxSim sums the best cosine of each query token; dividing by the count
makes it the mean the weight was chosen for, so a long query weighs no more than
a short one. The fused stage is stated twice (once for its score, once as the
candidates MaxSim scores): a formula sees only its own prefetches' scores. The
embedded store, which pays no round trip for a second request, asks MaxSim by id
over the search's fused candidates instead and adds it here (`reranked`;
edge/maxsim_rerank.py). A memory without token vectors yet (a store being upgraded)
scores MaxSim 0.
Why this depth and weight: benchmarks/README.md, "The rerank: MaxSim asked by id,
weight and depth chosen with feedback".

A score is comparable within one answer only: BM25 grows with the store's term
statistics, so a fused score's scale depends on the store.

Engines spell requests with different classes, so each supplies a small
`RankingDialect` (as `filters.Dialect`); the plan is decided here once.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from adapters.values import SearchMode, SearchQuery, SparseVector, TokenVectors

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
    dialect: RankingDialect[Q, P, R, F, E], query: SearchQuery, wheres: list[F], limit: int
) -> list[R]:
    """One engine request per filter (pin side) ranking it for `query`, for one batch."""
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
        weight = rerank_weight(len(query.tokens))
        fused.append(dialect.fused([first, by_tokens], _weighted(dialect, weight), defaults, limit))
    return fused


def rerank_weight(query_tokens: int) -> float:
    """MaxSim's weight for a query of `query_tokens` token vectors (the mean's, above)."""
    return RERANK_WEIGHT / query_tokens


def reranked(
    candidates: Sequence[tuple[K, float]], max_sim: Mapping[K, float], query_tokens: int, limit: int
) -> list[tuple[K, float]]:
    """The `limit` best of `candidates` (key, fused score) by the rerank's score above,
    for an engine that asks MaxSim in a request of its own (edge/maxsim_rerank.py); a key
    missing from `max_sim` (no token vectors yet) scores MaxSim 0."""
    weight = rerank_weight(query_tokens)
    scored = [(key, fused + weight * max_sim.get(key, 0.0)) for key, fused in candidates]
    scored.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep the fused order
    return scored[:limit]


def _weighted(dialect: RankingDialect[Q, P, R, F, E], weight: float) -> E:
    """$score[0] + weight * $score[1]."""
    return dialect.add(
        [dialect.score(0), dialect.multiply([dialect.constant(weight), dialect.score(1)])]
    )
