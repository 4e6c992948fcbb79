"""qdrant-client's spelling of what both server layouts ask: filters, indexes, reads.

`adapters.qdrant.filters` and `adapters.qdrant.ranking` decide what a read asks
for; this module (with client_ranking.py) says it in qdrant-client's models.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client.http import models

from adapters.merge import pin_sides
from adapters.qdrant import filters
from adapters.qdrant import ranking
from adapters.qdrant.layout import FIELD_CREATED_US
from adapters.qdrant.layout import IndexKind
from adapters.qdrant.layout import Scope
from adapters.qdrant.server.client_ranking import CLIENT_RANKING
from adapters.values import MemoryFilter
from adapters.values import SearchQuery

IndexParams = models.PayloadSchemaType | models.KeywordIndexParams | models.IntegerIndexParams

DENSE = ""  # the name a server gives a collection's unnamed dense vector
# What a read asks for: a search's ranking, or newest first.
Query = SearchQuery | models.OrderByQuery
NEWEST_FIRST = models.OrderByQuery(
    order_by=models.OrderBy(key=FIELD_CREATED_US, direction=models.Direction.DESC)
)
_INT = models.PayloadSchemaType.INTEGER
_INDEX_PARAMS: dict[IndexKind, IndexParams] = {
    IndexKind.TENANT: models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD, is_tenant=True
    ),
    IndexKind.KEYWORD: models.PayloadSchemaType.KEYWORD,
    # order_by on a server needs a range index; lookup serves equality too.
    IndexKind.ORDERED_INTEGER: models.IntegerIndexParams(type=_INT, lookup=True, range=True),
    IndexKind.RANGE_INTEGER: models.IntegerIndexParams(type=_INT, lookup=False, range=True),
    IndexKind.MATCH_INTEGER: models.IntegerIndexParams(type=_INT, lookup=True, range=False),
}


def index_params(kind: IndexKind) -> IndexParams:
    """How qdrant-client spells a payload index of this kind."""
    return _INDEX_PARAMS[kind]


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
