"""qdrant-edge's shard: how it is configured, and spoken to (filters, ranking, vectors, errors)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

import qdrant_edge as qe

from adapters.errors import BackendError
from adapters.errors import BackendUnavailable
from adapters.errors import StorageDamaged
from adapters.errors import StorageFull
from adapters.qdrant import token_codes
from adapters.qdrant import wordpieces
from adapters.qdrant.layout import IndexKind
from adapters.qdrant.layout import memory_from_shared
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR as FLOAT_TOKENS
from adapters.qdrant.token_codes import TOKEN_CODES_VECTOR
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import FillVector
from adapters.values import MemoryRecord
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import VectorKind

log = logging.getLogger(__name__)


# Each integer index keeps only the structures its filters use: every one a shard loads
# is held in memory, and a worker's memory is what the kernel tears down when it dies.
INDEX_SCHEMAS: dict[IndexKind, Any] = {
    IndexKind.TENANT: qe.KeywordIndexParams(is_tenant=True),
    IndexKind.KEYWORD: qe.PayloadSchemaType.Keyword,
    IndexKind.ORDERED_INTEGER: qe.IntegerIndexParams(lookup=False, range=True),
    IndexKind.RANGE_INTEGER: qe.IntegerIndexParams(lookup=False, range=True),
    IndexKind.MATCH_INTEGER: qe.IntegerIndexParams(lookup=True, range=False),
}


class EdgeDialect:
    """qdrant-edge's spelling of filters (adapters/qdrant/filters.py)."""

    def match_value(self, key: str, value: str | int) -> Any:
        return qe.FieldCondition(key, match=qe.MatchValue(value))

    def match_any(self, key: str, values: Sequence[str]) -> Any:
        return qe.FieldCondition(key, match=qe.MatchAny(list(values)))

    def at_most(self, key: str, value: int) -> Any:
        return qe.FieldCondition(key, range=qe.RangeFloat(lte=float(value)))

    def filter(self, must: list[Any], must_not: list[Any]) -> Any:
        return qe.Filter(must=must or None, must_not=must_not or None)


EDGE = EdgeDialect()


class EdgeRanking:
    """qdrant-edge's spelling of a search (adapters/qdrant/ranking.py). Dense stages are
    exact: indexing is off, and the tenant index bounds what they read. `with_payload`:
    False for ids and scores only, a list of fields for those alone (search_passes.py)."""

    _EXACT = qe.SearchParams(exact=True)

    def __init__(self, *, with_payload: bool | list[str] = True) -> None:
        self._with_payload = with_payload

    def dense_query(self, vector: Sequence[float]) -> Any:
        return qe.Query.Nearest(list(vector))

    def keyword_query(self, vector: SparseVector) -> Any:
        return qe.Query.Nearest(sparse(vector), using=KEYWORDS_VECTOR)

    def dense(self, query: Any, limit: int, where: Any) -> Any:
        return qe.Prefetch(limit=limit, query=query, filter=where, params=self._EXACT)

    def keywords(self, query: Any, limit: int, where: Any) -> Any:
        return qe.Prefetch(limit=limit, query=query, filter=where)

    def token_query(self, vectors: TokenVectors) -> Any:
        return coded_token_query(token_codes.encoded_query(vectors))

    def rescore(self, query: Any, candidates: list[Any], limit: int) -> Any:
        return qe.Prefetch(limit=limit, query=query, prefetches=candidates)

    def formula(
        self, stages: list[Any], formula: Any, defaults: dict[str, float], limit: int
    ) -> Any:
        return qe.Prefetch(
            limit=limit, prefetches=stages, query=qe.Formula(formula, defaults=defaults)
        )

    def alone(self, stage: Any) -> Any:
        return qe.QueryRequest(
            limit=stage.limit,
            query=stage.query,
            filter=stage.filter,
            params=stage.params,
            with_payload=self._with_payload,
        )

    def fused(self, stages: list[Any], formula: Any, defaults: dict[str, float], limit: int) -> Any:
        return qe.QueryRequest(
            limit=limit,
            prefetches=stages,
            query=qe.Formula(formula, defaults=defaults),
            with_payload=self._with_payload,
        )

    def score(self, index: int) -> Any:
        return qe.Expression.Variable(f"$score[{index}]")

    def constant(self, value: float) -> Any:
        return qe.Expression.Constant(value)

    def add(self, terms: list[Any]) -> Any:
        return qe.Expression.Sum(terms)

    def multiply(self, factors: list[Any]) -> Any:
        return qe.Expression.Mult(factors)


EDGE_RANKING = EdgeRanking()


def sparse(vector: SparseVector) -> Any:
    return qe.SparseVector(list(vector.indices), list(vector.values))


DENSE_VECTOR = ""  # qdrant-edge's name for a shard's unnamed dense vector


def dense_vector(point: Any) -> list[float]:
    """The stored dense vector of a point read with its vectors."""
    vector = point.vector
    if isinstance(vector, dict):
        vector = vector[DENSE_VECTOR]
    return [float(x) for x in vector]


def coded_token_query(coded: token_codes.CodedQuery) -> Any:
    """MaxSim over the stored token codes (scores in the codes' units: `coded.max_sim`)."""
    return qe.Query.Nearest(coded.rows, using=TOKEN_CODES_VECTOR)


def point_vectors(
    dense: Sequence[float], keywords: SparseVector | None, tokens: TokenVectors | None = None
) -> Any:
    """A point's vectors: the dense one and, when computed, its keyword and token vectors."""
    if keywords is None and tokens is None:
        return list(dense)
    vectors: dict[str, Any] = {DENSE_VECTOR: list(dense)}
    if keywords is not None:
        vectors[KEYWORDS_VECTOR] = sparse(keywords)
    if tokens is not None:
        vectors.update(token_vectors(tokens))
    return vectors


def token_vectors(tokens: TokenVectors) -> dict[str, Any]:
    """A memory's token codes and, where the tokens carry their ids, its wordpieces."""
    vectors: dict[str, Any] = {TOKEN_CODES_VECTOR: token_codes.encoded(tokens)}
    if (pieces := wordpieces.document(tokens)) is not None:
        vectors[WORDPIECES_VECTOR] = sparse(pieces)
    return vectors


def fill_vectors(vector: FillVector) -> dict[str, Any]:
    """What the fill writes for `vector`: a keyword vector, or token vectors (`token_vectors`)."""
    if isinstance(vector, SparseVector):
        return {KEYWORDS_VECTOR: sparse(vector)}
    return token_vectors(vector)


def idf_requests(
    ids: Sequence[int], using: str = WORDPIECES_VECTOR, limit: int = 1, where: Any = None
) -> list[Any]:
    """One request per term id of the sparse vector `using`: its best `limit` holders (of
    those `where` admits), each scored its stored weight times the id's IDF in the shard;
    by default the id's IDF (a wordpiece is stored as 1.0). No answer where none holds it."""
    return [
        qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(qe.SparseVector([term], [1.0]), using=using),
            filter=where,
            with_payload=False,
        )
        for term in ids
    ]


def among(ids: Sequence[Any]) -> Any:
    """The filter of the points `ids`."""
    return qe.Filter(must=[qe.HasIdCondition(set(ids))])


def edge_config(dimension: int, token_dimension: int | None = None) -> Any:
    """Cosine, one search thread per query, HNSW indexing off; keyword vectors and wordpieces
    with the engine's IDF; token vectors of `token_dimension` (None: `dimension`)."""
    return qe.EdgeConfig(
        vectors={
            DENSE_VECTOR: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
            TOKEN_CODES_VECTOR: token_params(token_dimension or dimension),
        },
        sparse_vectors={KEYWORDS_VECTOR: _KEYWORD_PARAMS, WORDPIECES_VECTOR: _KEYWORD_PARAMS},
        max_search_threads=1,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
    )


_KEYWORD_PARAMS = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)


_MAX_SIM = qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
# Token vectors are only ever read to rescore a few candidates: no index of their own.
_NO_INDEX = qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10000)


def token_params(dimension: int) -> Any:
    """Token vectors coded as bytes (adapters/qdrant/token_codes.py): MaxSim, no index, on disk."""
    return qe.EdgeVectorParams(
        size=token_codes.code_dimension(dimension),
        distance=qe.Distance.Dot,
        multivector_config=_MAX_SIM,
        datatype=qe.VectorStorageDatatype.Uint8,
        hnsw_config=_NO_INDEX,
        memory=qe.Memory.Cold,
    )


def add_vectors(shard: Any, kind: VectorKind, dimension: int, *, reset: bool = False) -> None:
    """Give the shard its vectors of `kind` (keyword vectors; token codes of `dimension` and
    their wordpieces), a no-op when it has them: a store written without them gains them in
    place, for plugin/upgrades/vector_fill.py to fill. `reset`: keyword vectors dropped first
    (another encoder made them)."""
    if kind is VectorKind.KEYWORDS and reset:
        shard.update(qe.UpdateOperation.delete_vector_name(KEYWORDS_VECTOR))
    sparse_name = KEYWORDS_VECTOR if kind is VectorKind.KEYWORDS else WORDPIECES_VECTOR
    shard.update(qe.UpdateOperation.create_sparse_vector(sparse_name, modifier=qe.Modifier.Idf))
    if kind is VectorKind.KEYWORDS:
        return
    try:
        shard.update(
            qe.UpdateOperation.create_dense_vector(
                TOKEN_CODES_VECTOR,
                token_codes.code_dimension(dimension),
                qe.Distance.Dot,
                multivector_config=_MAX_SIM,
                datatype=qe.VectorStorageDatatype.Uint8,
            )
        )
    except Exception as error:  # a created store's has its placement too: "other parameters"
        if "already exists" not in str(error):
            raise


def drop_other_tokens(shard: Any, vectors: dict[str, Any], dimension: int) -> None:
    """Drop token vectors of another kind than `token_params(dimension)`'s, by the shard's
    configured `vectors`: a development build's float16 ones, or codes of another size (the
    embedder's projection changed); `add_vectors` adds this store's, and the fill fills them."""
    if FLOAT_TOKENS in vectors:
        shard.update(qe.UpdateOperation.delete_vector_name(FLOAT_TOKENS))
    codes = vectors.get(TOKEN_CODES_VECTOR)
    if codes is not None and codes.get("size") != token_codes.code_dimension(dimension):
        shard.update(qe.UpdateOperation.delete_vector_name(TOKEN_CODES_VECTOR))
        # the fill finds a memory by its missing wordpieces: they go with the codes
        with contextlib.suppress(Exception):  # a store written before wordpieces had none
            shard.update(qe.UpdateOperation.delete_vector_name(WORDPIECES_VECTOR))


def translate(error: BaseException) -> BackendError:
    """What a worker-thread failure means for callers. The message names no file: the
    engine's carry paths, so they stay on the exception chain (logged by the HTTP layer)."""
    if isinstance(error, BackendError):
        return error
    text = str(error)
    full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    if full or "No space left" in text or "database or disk is full" in text:
        return StorageFull("the data volume is full; free space or grow the volume")
    if isinstance(error, sqlite3.Error):
        return StorageDamaged("the embedded store's namespace records could not be read or written")
    if isinstance(error, OSError):  # permissions, I/O errors: the store cannot serve now
        return BackendUnavailable(f"embedded store: {error.strerror or type(error).__name__}")
    return StorageDamaged("the embedded store could not read or write its files")


def fatal(error: BaseException) -> bool:
    """Exceptions a worker must never swallow (a Rust panic is a BaseException, not these)."""
    return isinstance(error, asyncio.CancelledError | KeyboardInterrupt | SystemExit)


def parsed_memory(point: Any) -> MemoryRecord | None:
    """The memory in `point`'s payload; None (and a log line) when the payload is damaged."""
    try:
        return memory_from_shared(point.payload)
    except (KeyError, TypeError, ValueError) as error:
        log.error("memory payload unreadable, point %s skipped: %r", point.id, error)
        return None
