"""qdrant-client's spelling of a search's stages, for `adapters.qdrant.ranking`.

Apart from the calls (connection.py), which build their requests with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from qdrant_client.http import models

from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import float_rows


class Query(NamedTuple):
    """A query vector and the vector it searches (None: the unnamed dense one)."""

    vector: list[float] | list[list[float]] | models.SparseVector
    using: str | None


class ClientRanking:
    """qdrant-client's spelling of a search (adapters/qdrant/ranking.py). Dense stages use
    the collection's index (HNSW per tenant in the shared layout)."""

    def dense_query(self, vector: Sequence[float]) -> Query:
        return Query([float(x) for x in vector], None)

    def keyword_query(self, vector: SparseVector) -> Query:
        return Query(sparse(vector), KEYWORDS_VECTOR)

    def token_query(self, vectors: TokenVectors) -> Query:
        return Query(float_rows(vectors), TOKENS_VECTOR)

    def dense(self, query: Query, limit: int, where: models.Filter | None) -> models.Prefetch:
        return models.Prefetch(query=query.vector, using=query.using, filter=where, limit=limit)

    def keywords(self, query: Query, limit: int, where: models.Filter | None) -> models.Prefetch:
        return self.dense(query, limit, where)  # a server stage needs no per-vector params

    def rescore(
        self, query: Query, candidates: list[models.Prefetch], limit: int
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
