"""A store as the previous version wrote it: memories without keyword vectors, no encoder record.

The starting point of the keyword-index upgrade tests (tests/upgrades/test_keyword_index*.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.engine import edge_config
from adapters.engine.engine import point_vectors
from adapters.engine.record_store import RecordStore
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.store_files import SHARD_COUNT
from adapters.store_files import SHARDS_DIR
from adapters.store_files import shard_index
from adapters.values import NamespaceRecord
from plugin.core.fingerprint import META_KEY
from plugin.upgrades.vector_fill import COMPLETE
from plugin.upgrades.vector_fill import META_ENCODER
from plugin.upgrades.vector_fill import META_STATE
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit

NAMES = ["workspace:one", "team:two"]
PER_NAMESPACE = 150
RARE = "ticket XJ-4471 was escalated to finance"


def contents(name: str) -> list[str]:
    rows = [f"{name} note {index} about the weekly planning" for index in range(PER_NAMESPACE)]
    rows[7] = RARE
    return rows


def write_previous_version(
    data: Path, vectors: Any = None, keywords: Any = None, *, float_tokens: bool = False
) -> None:
    """A data directory as the version before keyword vectors left it: a shard without a
    sparse vector, namespace records, and store metadata naming only the embedding.

    With a keyword encoder `keywords`: as the version before token vectors left it:
    every memory with its keyword vector, the keyword index complete, no
    token vectors. With `float_tokens` too: as a development build left it, every memory
    with its token vectors as float16 (`vectors` keeping tokens)."""
    root = data / "store"
    root.mkdir(parents=True)
    records = RecordStore(root / "namespaces.sqlite3")
    records.open()
    dimension = DIM if vectors is None else vectors.dimension
    old = edge_config(dimension)
    dense = qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)
    sparse = {KEYWORDS_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}
    float16 = qe.EdgeVectorParams(
        size=dimension if vectors is None else vectors.token_dimension,
        distance=qe.Distance.Cosine,
        multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
        datatype=qe.VectorStorageDatatype.Float16,
    )
    config = qe.EdgeConfig(
        vectors={"": dense, TOKENS_VECTOR: float16} if float_tokens else dense,
        sparse_vectors=None if keywords is None else sparse,
        max_search_threads=1,
        optimizers=old.optimizers,
    )
    opened: dict[int, Any] = {}

    def shard_of(name: str) -> Any:
        index = shard_index(name, SHARD_COUNT)
        if index not in opened:  # the other shards the store creates when it opens
            path = root / SHARDS_DIR / f"{index:02d}"
            opened[index] = qe.EdgeShard.create(str(path), config)
        return opened[index]

    def keyword_vector(text: str) -> Any:
        return None if keywords is None else keywords.document(text)

    def point_of(text: str, vector: Any) -> Any:
        found = point_vectors(vector, keyword_vector(text))
        if float_tokens:
            found = {**found, TOKENS_VECTOR: vectors.embed([text], tokens=True)[0].tokens.rows()}
        return found

    for name in NAMES:
        epoch = records.save(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        texts = contents(name)
        dense = (
            [unit(1, i / 100) for i in range(len(texts))]
            if vectors is None
            else (vectors.encode(texts))
        )
        points = [
            qe.Point(point_id(name, m.id), point_of(text, vector), payload)
            for text, vector in zip(texts, dense, strict=True)
            for m in [memory(name, content=text)]
            for payload in [memory_to_payload(m, epoch)]
        ]
        shard_of(name).update(qe.UpdateOperation.upsert_points(points))
    fingerprint = "all-MiniLM-L6-v2/torch" if vectors is not None else "test/synthetic"
    records.set_meta(META_KEY, fingerprint)
    if keywords is not None:
        records.set_meta(META_ENCODER, keywords.identity)
        records.set_meta(META_STATE, COMPLETE)
    for shard in opened.values():
        shard.flush()
        shard.close()
    records.close()


def stored_vectors(store: QdrantEdgeBackend, vector: str) -> dict[str, tuple[str, Any]]:
    """Every point's content with its stored `vector` (None when it has none), by point id."""
    found: dict[str, tuple[str, Any]] = {}
    for shard in store.store.shards.open_shards():
        offset = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=256, with_payload=True, with_vector=[vector]
            )
            page, offset = shard.scroll(request)
            for point in page:
                vectors = point.vector if isinstance(point.vector, dict) else {}
                found[str(point.id)] = (point.payload["content"], vectors.get(vector))
            if offset is None:
                break
    return found


def stored_keywords(store: QdrantEdgeBackend) -> dict[str, tuple[str, Any]]:
    """Every point's content with its stored keyword vector (None when it has none)."""
    return stored_vectors(store, KEYWORDS_VECTOR)


def matches(stored: Any, expected: Any) -> bool:
    return stored is not None and (list(stored.indices), list(stored.values)) == (
        list(expected.indices),
        pytest.approx(list(expected.values), rel=1e-6),
    )
