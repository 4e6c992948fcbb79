"""A mocked Qdrant server for the server layouts' HTTP tests (tests/qdrant/http/).

Its address, the collections and payload indexes the shared layout expects, and
the points it answers with. REST envelopes come from tests/support/qdrant_rest.py.
"""

from __future__ import annotations

import json
from typing import Any

import respx
from qdrant_client.http import models

from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.layout import point_id
from adapters.qdrant.server.tenant_namespaces import record_id
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from tests.support.qdrant_rest import ok
from tests.support.records import DIM
from tests.support.records import T0

URL = "http://qdrant.test:6333"
NS = "workspace:abc"
MEM = "/collections/memory-memories"
REC = "/collections/memory-namespaces"
INTEGER = {"type": "integer"}
MEMORY_SCHEMAS = {
    "ns": {"type": "keyword", "is_tenant": True},
    "epoch": "keyword",
    "created_us": {**INTEGER, "lookup": True, "range": True},
    "expires_us": {**INTEGER, "lookup": False, "range": True},
    "pinned": {**INTEGER, "lookup": True, "range": False},
    "kind": "keyword",
}
RECORD_SCHEMAS = {"type": "keyword", "expires_us": MEMORY_SCHEMAS["expires_us"]}
VECTORS = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
# A memory collection's dense vectors as this version creates them: the embedding, and the
# token vectors (MaxSim over dot products, no graph, int8 copy, float16 on disk:
# docs/backends.md).
TOKENS = {
    "size": DIM,
    "distance": "Dot",
    "multivector_config": {"comparator": "max_sim"},
    "hnsw_config": {"m": 0, "payload_m": 0},
    "quantization_config": {"scalar": {"type": "int8", "always_ram": False}},
    "on_disk": True,
    "datatype": "float16",
}
MEMORY_VECTORS = {"": {"size": DIM, "distance": "Cosine"}, "tokens": TOKENS}


def body(call: Any) -> Any:
    return json.loads(call.request.content)


def record(name: str = NS, **fields: Any) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind="workspace", created_at=T0, **fields)


def record_point(name: str, epoch: str) -> models.Record:
    payload = {"type": "record", "name": name, "epoch": epoch}
    return models.Record(
        id=record_id(name), payload={**payload, "record": namespace_to_json(record(name))}
    )


def stored(item: MemoryRecord, epoch: str, score: float = 0.5) -> models.ScoredPoint:
    payload = memory_to_payload(item, epoch)
    return models.ScoredPoint(
        id=point_id(item.namespace, item.id), version=1, score=score, payload=payload
    )


def no_memories(router: respx.MockRouter) -> None:
    """The records collection answers, with no namespace: every read finds nothing."""
    router.post(f"{REC}/points").mock(return_value=ok([]))
