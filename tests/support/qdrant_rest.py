"""Qdrant REST responses as a Qdrant 1.16+ server sends them, for respx routes.

Bodies are built from `qdrant_client.http.models`, so their shapes are the SDK's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx
import respx
from pydantic import BaseModel
from qdrant_client.http import models

from adapters.qdrant import layout
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server.keyword_vectors import KEYWORD_VECTORS
from adapters.qdrant.server.tenant_collections import MEMORY_STORE_INDEXES
from adapters.qdrant.server.tenant_collections import RECORD_INDEXES
from adapters.qdrant.server.token_vectors import SPARSE_VECTORS
from adapters.qdrant.server.token_vectors import token_params

KEYWORD_KINDS = frozenset({layout.IndexKind.TENANT, layout.IndexKind.KEYWORD})


def ok(result: Any) -> httpx.Response:
    """A Qdrant success envelope around `result` (a model, or plain JSON)."""
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json", exclude_unset=True)
    elif isinstance(result, list):
        result = [r.model_dump(mode="json", exclude_unset=True) for r in result]
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.001})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"status": {"error": message}, "time": 0.001}, headers=headers
    )


def not_found(collection: str) -> httpx.Response:
    return error(404, f"Not found: Collection `{collection}` doesn't exist!")


def completed() -> httpx.Response:
    return ok(models.UpdateResult(operation_id=7, status=models.UpdateStatus.COMPLETED))


def collections(*names: str) -> httpx.Response:
    """GET /collections listing `names`."""
    described = [models.CollectionDescription(name=name) for name in names]
    return ok(models.CollectionsResponse(collections=described))


def collection_info(
    vectors: models.VectorParams | dict[str, models.VectorParams],
    indexed: Iterable[str] = (),
    *,
    keyword: Iterable[str] = (),
    metadata: dict[str, Any] | None = None,
    sparse: dict[str, models.SparseVectorParams] | None = None,
) -> httpx.Response:
    """GET /collections/{name} as a Qdrant 1.16+ server answers it."""
    keywords = set(keyword)
    schema = {
        field: models.PayloadIndexInfo(
            data_type=models.PayloadSchemaType.KEYWORD
            if field in keywords
            else models.PayloadSchemaType.INTEGER,
            points=0,
        )
        for field in indexed
    }
    return ok(
        models.CollectionInfo(
            status=models.CollectionStatus.GREEN,
            optimizer_status=models.OptimizersStatusOneOf.OK,
            points_count=0,
            indexed_vectors_count=0,
            segments_count=2,
            config=models.CollectionConfig(
                params=models.CollectionParams(vectors=vectors, sparse_vectors=sparse),
                hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
                optimizer_config=models.OptimizersConfig(
                    default_segment_number=0, flush_interval_sec=5, deleted_threshold=0.2
                ),
                wal_config=models.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
                metadata=metadata,
            ),
            payload_schema=schema,
        )
    )


def memory_vectors(
    dimension: int, *, token_vectors: bool = True
) -> models.VectorParams | dict[str, models.VectorParams]:
    """A memory collection's dense vectors as the server describes them: the embedding and
    the token vectors by name, or the embedding alone, unnamed (made before token vectors)."""
    dense = models.VectorParams(size=dimension, distance=models.Distance.COSINE)
    return {"": dense, TOKENS_VECTOR: token_params(dimension)} if token_vectors else dense


def shared_store_info(
    dimension: int,
    indexes: dict[str, layout.IndexKind],
    *,
    vectors: bool = True,
    keyword_vectors: bool = True,
    token_vectors: bool = True,
) -> httpx.Response:
    """A shared-layout collection with all of `indexes` (memories, or records without vectors);
    the memories with their keyword vector unless `keyword_vectors` is False (a store made
    before keyword vectors existed), their token vectors unless `token_vectors` is."""
    keywords = [field for field, kind in indexes.items() if kind in KEYWORD_KINDS]
    params: models.VectorParams | dict[str, models.VectorParams] = {}
    sparse = None
    if vectors:
        current = token_vectors and keyword_vectors
        params = memory_vectors(dimension, token_vectors=current)
        sparse = (SPARSE_VECTORS if current else KEYWORD_VECTORS) if keyword_vectors else None
    return collection_info(params, indexes, keyword=keywords, sparse=sparse)


def mock_shared_ready(
    router: respx.MockRouter, dimension: int, prefix: str = "memory-", *, token_vectors: bool = True
) -> None:
    """The first-use requests of the shared layout, both collections already in place (the
    memories without token vectors unless `token_vectors`: made by the version before)."""
    memories, records = f"{prefix}memories", f"{prefix}namespaces"
    router.get("/collections").mock(return_value=collections(memories, records))
    router.get(f"/collections/{memories}").mock(
        return_value=shared_store_info(dimension, MEMORY_STORE_INDEXES, token_vectors=token_vectors)
    )
    router.get(f"/collections/{records}").mock(
        return_value=shared_store_info(dimension, RECORD_INDEXES, vectors=False)
    )
