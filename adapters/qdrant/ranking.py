"""How a search with a query ranks, for every Qdrant layout and engine: one request per pin side.

Dense: cosine over the embeddings. Keyword: BM25 over the keyword vectors (the
store applies IDF). Hybrid, fused inside the engine in the same one request:

    candidates = top CANDIDATES by cosine, and top CANDIDATES by BM25
    score      = cosine + KEYWORD_WEIGHT * BM25      (each candidate scored on both)

Why this fusion (measured on LoCoMo's development half, benchmarks/README.md):
- rank fusion (RRF, any k or weights) and DBSF either lost to BM25 alone at the
  top rank or to dense alone deep in the list; a weighted sum of the two scores
  did neither and recalled the most at every k;
- every candidate gets both scores: a prefetch only scores what it found, and
  scoring a BM25 candidate outside the dense top list as "cosine 0" cost 3 points
  of recall@5. So each list is re-scored on the other vector (cheap: at most
  CANDIDATES points each), and the formula takes whichever score is present;
- `max(a, b)` is written as `(a + b + |a - b|) / 2` because a server's formula
  has `abs` since Qdrant 1.14 but `max` only since 1.20.

A score is comparable within one answer only: BM25 grows with the store's
term statistics, so a fused score's scale depends on the store.

Engines spell requests with different classes, so each supplies a small
`RankingDialect` (as `filters.Dialect`); the plan is decided here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from adapters.base import SearchMode, SearchQuery, SparseVector

# The named sparse vector holding each memory's keyword vector.
KEYWORDS_VECTOR = "keywords"
KEYWORD_WEIGHT = 0.03
CANDIDATES = 100
QDRANT_SEARCH_MODES = frozenset(SearchMode)

P = TypeVar("P")  # a prefetch stage
R = TypeVar("R", covariant=True)  # a request
F = TypeVar("F", contravariant=True)  # a filter
E = TypeVar("E")  # a formula expression


class RankingDialect(Protocol, Generic[P, R, F, E]):
    """How one engine spells the stages of a search."""

    def dense(self, vector: Sequence[float], limit: int, where: F) -> P: ...

    def keywords(self, vector: SparseVector, limit: int, where: F) -> P: ...

    def rescore_dense(self, vector: Sequence[float], candidates: P, limit: int) -> P: ...

    def rescore_keywords(self, vector: SparseVector, candidates: P, limit: int) -> P: ...

    def alone(self, stage: P) -> R:
        """A request answering with one stage's own ranking."""
        ...

    def fused(self, stages: list[P], formula: E, defaults: dict[str, float], limit: int) -> R: ...

    def score(self, index: int) -> E: ...

    def constant(self, value: float) -> E: ...

    def add(self, terms: list[E]) -> E: ...

    def multiply(self, factors: list[E]) -> E: ...

    def negate(self, term: E) -> E: ...

    def absolute(self, term: E) -> E: ...


def request(dialect: RankingDialect[P, R, F, E], query: SearchQuery, where: F, limit: int) -> R:
    """The one engine request ranking one pin side (`where`) for `query`."""
    if query.keywords is None:
        assert query.dense is not None  # SearchQuery holds one at least
        return dialect.alone(dialect.dense(query.dense, limit, where))
    if query.dense is None:
        return dialect.alone(dialect.keywords(query.keywords, limit, where))
    pool = max(limit, CANDIDATES)
    by_dense = dialect.dense(query.dense, pool, where)
    by_keywords = dialect.keywords(query.keywords, pool, where)
    stages = [  # $score[0], [1]: cosine; $score[2], [3]: BM25
        by_dense,
        dialect.rescore_dense(query.dense, by_keywords, pool),
        dialect.rescore_keywords(query.keywords, by_dense, pool),
        by_keywords,
    ]
    cosine = _larger(dialect, dialect.score(0), dialect.score(1))
    bm25 = _larger(dialect, dialect.score(2), dialect.score(3))
    formula = dialect.add([cosine, dialect.multiply([dialect.constant(KEYWORD_WEIGHT), bm25])])
    # A candidate missing from a stage: the lowest cosine, no keyword match.
    defaults = {"$score[0]": -1.0, "$score[1]": -1.0, "$score[2]": 0.0, "$score[3]": 0.0}
    return dialect.fused(stages, formula, defaults, limit)


def _larger(dialect: RankingDialect[P, R, F, E], a: E, b: E) -> E:
    """max(a, b) = (a + b + |a - b|) / 2: a server's formula has no `max` before 1.20."""
    spread = dialect.absolute(dialect.add([a, dialect.negate(b)]))
    return dialect.multiply([dialect.constant(0.5), dialect.add([a, b, spread])])
