"""Token vectors on a Qdrant server, for both layouts: how they are configured, added, filled.

The multivector `tokens` and the sparse `wordpieces`, in every collection created here and added
in place where missing. See docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

from dataclasses import replace

from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.qdrant import wordpieces
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server import keyword_vectors
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.connection import NO_VECTOR
from adapters.qdrant.server.connection import Call
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import SearchQuery

_MAX_SIM = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
_NO_GRAPH = models.HnswConfigDiff(m=0, payload_m=0)
_INT8 = models.ScalarQuantization(
    scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=False)
)
# What a created collection's `tokens` has and an added one is given afterwards.
_PLACEMENT = models.VectorParamsDiff(hnsw_config=_NO_GRAPH, quantization_config=_INT8, on_disk=True)


def token_params(dimension: int) -> models.VectorParams:
    """The multivector of token vectors: MaxSim over dot products (the plugin's rows are unit
    vectors, and a query's are scaled by their weights, which cosine would undo), no graph,
    float16 on disk, an int8 copy for scoring (int8 recalled as float32 did:
    benchmarks/README.md)."""
    return models.VectorParams(
        size=dimension,
        distance=models.Distance.DOT,
        multivector_config=_MAX_SIM,
        hnsw_config=_NO_GRAPH,
        quantization_config=_INT8,
        on_disk=True,
        datatype=models.Datatype.FLOAT16,
    )


def collection_vectors(dimension: int, token_dimension: int) -> dict[str, models.VectorParams]:
    """A memory collection's dense vectors: the unnamed embedding and the token vectors."""
    return {
        DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE),
        TOKENS_VECTOR: token_params(token_dimension),
    }


def _tokens_of(info: models.CollectionInfo) -> models.VectorParams | None:
    vectors = info.config.params.vectors
    return vectors.get(TOKENS_VECTOR) if isinstance(vectors, dict) else None


def has_token_vector(info: models.CollectionInfo) -> bool:
    return _tokens_of(info) is not None


async def ensure_token_vector(
    call: Call, collection: str, dimension: int, info: models.CollectionInfo
) -> None:
    """Add `tokens` and `wordpieces` where `info` lacks them (in place: Qdrant 1.18+), and give
    `tokens` its placement (no graph, int8, on disk) where it has a graph of its own: added
    just now, or an upgrade cut short between its two requests. Token vectors of another size
    or compared by cosine are dropped first, with the wordpieces the fill finds memories by
    (plugin/upgrades/vector_fill.py): it gives every memory its own again."""
    found = _tokens_of(info)
    pieces = WORDPIECES_VECTOR in (info.config.params.sparse_vectors or {})
    if found is not None and (found.size != dimension or found.distance != models.Distance.DOT):
        await call(lambda c: c.delete_vector_name(collection, TOKENS_VECTOR))
        if pieces:
            await call(lambda c: c.delete_vector_name(collection, WORDPIECES_VECTOR))
        found, pieces = None, False
    if found is None:
        config = models.DenseVectorNameConfig(
            dense=models.DenseVectorConfig(
                size=dimension,
                distance=models.Distance.DOT,
                multivector_config=_MAX_SIM,
                datatype=models.VectorStorageDatatype.FLOAT16,
            )
        )
        await keyword_vectors.add_vector(call, collection, TOKENS_VECTOR, config, _NEW_TOKENS_LINE)
    graph = None if found is None else found.hnsw_config
    if graph is None or graph.m != 0 or graph.payload_m != 0:
        placement = {TOKENS_VECTOR: _PLACEMENT}
        await call(lambda c: c.update_collection(collection, vectors_config=placement))
    if not pieces:
        idf = keyword_vectors.NEW_IDF_SPARSE
        await keyword_vectors.add_vector(call, collection, WORDPIECES_VECTOR, idf, _NEW_TOKENS_LINE)


async def ensure_vectors(
    call: Call, collection: str, info: models.CollectionInfo, token_dimension: int | None
) -> None:
    """Give `collection` its keyword vector and, with a `token_dimension`, its token vectors,
    where `info` shows them missing (`ensure_token_vector`)."""
    if not keyword_vectors.has_keyword_vector(info):
        await keyword_vectors.add_keyword_vector(call, collection)
    if token_dimension is not None:
        await ensure_token_vector(call, collection, token_dimension, info)


# Every memory collection's sparse vectors: the keyword vector and the wordpieces.
SPARSE_VECTORS = {**keyword_vectors.KEYWORD_VECTORS, WORDPIECES_VECTOR: keyword_vectors.IDF_SPARSE}
_NEW_TOKENS_LINE = (
    "qdrant cannot add the token vectors to collection {} in place (needs Qdrant 1.18 or"
    " later): upgrade Qdrant, or set MEMORY_PLUGIN_SEARCH=hybrid (no search reranks); with"
    " it set, `memory-plugin-vector export` and `import` into a new"
    " MEMORY_PLUGIN_COLLECTION_PREFIX make collections that have them"
)


async def weighed_query(
    call: Call, collection: str, query: SearchQuery
) -> tuple[SearchQuery, float | None]:
    """`query` with its token vectors weighed by their wordpieces' IDF in `collection`
    (one request per distinct wordpiece, in one batch), and the weights' sum
    (`ranking.requests`' mass); as it is, with None, where it asks no weights."""
    ids = [] if not query.weigh_tokens or not query.tokens else wordpieces.query_ids(query.tokens)
    if not ids or query.tokens is None:
        return query, None
    requests = [
        models.QueryRequest(
            query=models.SparseVector(indices=[piece], values=[1.0]),
            using=WORDPIECES_VECTOR,
            limit=1,
            with_payload=False,
        )
        for piece in ids
    ]
    try:
        answers = await call(lambda c: c.query_batch_points(collection, requests))
    except CollectionMissing:  # gone meanwhile: the search itself answers that
        return query, None
    except BackendError as exc:  # no wordpieces here yet (an older replica's collection)
        if NO_VECTOR not in str(exc):
            raise
        return query, None
    idf = {
        piece: answer.points[0].score
        for piece, answer in zip(ids, answers, strict=True)
        if answer.points
    }
    weighed = wordpieces.weighed(query.tokens, idf)
    return replace(query, tokens=weighed.tokens), weighed.mass
