"""qdrant-client's spelling of what both server layouts ask: filters, indexes, reads.

`adapters.qdrant.filters` and `adapters.qdrant.ranking` decide what a read asks
for; this module says it in qdrant-client's models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from qdrant_client.http import models

from adapters.merge import pin_sides
from adapters.qdrant import filters
from adapters.qdrant import ranking
from adapters.qdrant.layout import FIELD_CREATED_US
from adapters.qdrant.layout import IndexKind
from adapters.qdrant.layout import Scope
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.values import MemoryFilter
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import float_rows

IndexParams = models.PayloadSchemaType | models.KeywordIndexParams | models.IntegerIndexParams

DENSE = ""  # the name a server gives a collection's unnamed dense vector
# What a read asks for: a search's ranking, or newest first.
Query = SearchQuery | models.OrderByQuery
NEWEST_FIRST = models.OrderByQuery(
    order_by=models.OrderBy(key=FIELD_CREATED_US, direction=models.Direction.DESC)
)
_INT = models.PayloadSchemaType.INTEGER
# How qdrant-client spells a payload index of each kind.
INDEX_PARAMS: dict[IndexKind, IndexParams] = {
    IndexKind.TENANT: models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD, is_tenant=True
    ),
    IndexKind.KEYWORD: models.PayloadSchemaType.KEYWORD,
    # order_by on a server needs a range index; lookup serves equality too.
    IndexKind.ORDERED_INTEGER: models.IntegerIndexParams(type=_INT, lookup=True, range=True),
    IndexKind.RANGE_INTEGER: models.IntegerIndexParams(type=_INT, lookup=False, range=True),
    IndexKind.MATCH_INTEGER: models.IntegerIndexParams(type=_INT, lookup=True, range=False),
}


class ClientDialect:
    """qdrant-client's spelling of conditions, for `adapters.qdrant.filters`."""

    def match_value(self, key: str, value: str | int) -> models.FieldCondition:
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    def match_any(self, key: str, values: Sequence[str]) -> models.FieldCondition:
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))

    def at_most(self, key: str, value: int) -> models.FieldCondition:
        return models.FieldCondition(key=key, range=models.Range(lte=value))

    def filter(
        self, must: list[models.FieldCondition], must_not: list[models.FieldCondition]
    ) -> models.Filter:
        return models.Filter(must=list(must) or None, must_not=list(must_not) or None)


DIALECT = ClientDialect()


class VectorQuery(NamedTuple):
    """A query vector and the vector it searches (None: the unnamed dense one)."""

    vector: list[float] | list[list[float]] | models.SparseVector
    using: str | None


class ClientRanking:
    """qdrant-client's spelling of a search's stages, for `adapters.qdrant.ranking`. Dense
    stages use the collection's index (HNSW per tenant in the shared layout)."""

    def dense_query(self, vector: Sequence[float]) -> VectorQuery:
        return VectorQuery([float(x) for x in vector], None)

    def keyword_query(self, vector: SparseVector) -> VectorQuery:
        return VectorQuery(sparse(vector), KEYWORDS_VECTOR)

    def token_query(self, vectors: TokenVectors) -> VectorQuery:
        return VectorQuery(float_rows(vectors), TOKENS_VECTOR)

    def dense(self, query: VectorQuery, limit: int, where: models.Filter | None) -> models.Prefetch:
        return models.Prefetch(query=query.vector, using=query.using, filter=where, limit=limit)

    def keywords(
        self, query: VectorQuery, limit: int, where: models.Filter | None
    ) -> models.Prefetch:
        return self.dense(query, limit, where)  # a server stage needs no per-vector params

    def rescore(
        self, query: VectorQuery, candidates: list[models.Prefetch], limit: int
    ) -> models.Prefetch:
        return models.Prefetch(
            query=query.vector, using=query.using, prefetch=candidates, limit=limit
        )

    def formula(
        self,
        stages: list[models.Prefetch],
        formula: models.Expression,
        defaults: dict[str, float],
        limit: int,
    ) -> models.Prefetch:
        query = models.FormulaQuery(formula=formula, defaults=dict(defaults))
        return models.Prefetch(prefetch=stages, query=query, limit=limit)

    def alone(self, stage: models.Prefetch) -> models.QueryRequest:
        return models.QueryRequest(
            query=stage.query,
            using=stage.using,
            filter=stage.filter,
            limit=stage.limit,
            with_payload=True,
        )

    def fused(
        self,
        stages: list[models.Prefetch],
        formula: models.Expression,
        defaults: dict[str, float],
        limit: int,
    ) -> models.QueryRequest:
        query = models.FormulaQuery(formula=formula, defaults=dict(defaults))
        return models.QueryRequest(prefetch=stages, query=query, limit=limit, with_payload=True)

    def score(self, index: int) -> models.Expression:
        return f"$score[{index}]"

    def constant(self, value: float) -> models.Expression:
        return value

    def add(self, terms: list[models.Expression]) -> models.Expression:
        return models.SumExpression(sum=terms)

    def multiply(self, factors: list[models.Expression]) -> models.Expression:
        return models.MultExpression(mult=factors)


CLIENT_RANKING = ClientRanking()


def sparse(vector: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=list(vector.indices), values=list(vector.values))


def side_requests(
    memory_filter: MemoryFilter,
    limit: int,
    query: Query,
    scope: Scope | None = None,
    mass: float | None = None,
) -> list[models.QueryRequest]:
    """One request per pin side asked (pinned first), for one `query_batch_points`.

    A search ranks as `adapters.qdrant.ranking` decides (`mass`: its weighed token
    vectors' weights' sum); a listing is newest first. Search params are left to the
    server: HNSW, per tenant in the shared layout."""
    wheres = [filters.memories(DIALECT, side, scope) for side in pin_sides(memory_filter)]
    if isinstance(query, SearchQuery):
        return ranking.requests(CLIENT_RANKING, query, wheres, limit, mass)
    return [
        models.QueryRequest(query=query, filter=where, limit=limit, with_payload=True)
        for where in wheres
    ]
