"""A corpus of memories and the export, import and search steps of the transfer tests.

Three namespaces of real sentences (pins, kinds, TTLs, propagation) plus what an
export must leave out, and helpers that run `export`/`import` in memory and
compare what two stores answer (tests/commands/test_transfer.py).
"""

from __future__ import annotations

import io
import json
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from typing import Any

import pytest

from adapters.base import VectorBackend
from adapters.callers import NOBODY
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from plugin.commands import export_import
from plugin.core.search_mode import Ranking
from plugin.core.search_mode import choose_ranking
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.wire import SearchRequest
from plugin.transfer import jsonl
from plugin.transfer.bulk import StoreWriter
from plugin.transfer.bulk import import_lines
from plugin.transfer.bulk import stream_export

NOW = datetime.now(UTC).replace(microsecond=0)
T0 = NOW - timedelta(days=3)
NAMES = ["workspace:alpha", "team:platform", "org:acme"]
TOPICS = [
    "deploys happen on Tuesdays after the standup",
    "the user prefers tabs over spaces",
    "the staging database is restored every night",
    "release notes are written by the on-call engineer",
    "the API gateway rate limit is 100 requests per second",
    "our coffee machine is on the third floor",
    "incident reviews are blameless and happen on Fridays",
    "the mobile app ships every two weeks",
]
QUERIES = ["when do we deploy", "code formatting preference", "database backups", ""]


def corpus() -> tuple[list[NamespaceRecord], list[MemoryRecord]]:
    """Three live namespaces of 40 memories each (pins, kinds, TTLs, propagation, places in
    write order), plus what an export must leave out: an expired memory and an expired
    namespace."""
    records = [
        NamespaceRecord(name=name, kind=name.split(":")[0], created_at=T0, metadata={"i": i})
        for i, name in enumerate(NAMES)
    ]
    records.append(NamespaceRecord(name="custom:gone", kind="custom", created_at=T0, expires_at=T0))
    memories = []
    for n, name in enumerate(NAMES):
        for i in range(40):
            memories.append(
                MemoryRecord(
                    id=f"{n:08x}-0000-4000-8000-{i:012x}",
                    namespace=name,
                    content=f"{TOPICS[i % len(TOPICS)]} (note {i} of {name})",
                    kind=("fact", "summary", "checkpoint")[i % 3],
                    source=("agent", "user", "runtime")[i % 3],
                    created_at=T0 + timedelta(minutes=i, microseconds=n),
                    pin=i % 9 == 0,
                    expires_at=NOW + timedelta(days=30) if i % 4 == 0 else None,
                    propagation={"to": [name], "depth": i} if i % 5 == 0 else None,
                    position=i,
                )
            )
    memories.append(
        MemoryRecord(
            id="0000ffff-0000-4000-8000-000000000000",
            namespace=NAMES[0],
            content="an expired memory",
            kind="fact",
            source="agent",
            created_at=T0,
            expires_at=NOW - timedelta(hours=1),
        )
    )
    return records, memories


async def seed(backend: VectorBackend, encoder: SentenceTransformerEncoder) -> None:
    """The corpus as the plugin stores it (keyword vectors included), then what the janitor
    does: expired items go, so the store's keyword statistics are those of what is live."""
    records, memories = corpus()
    for record in records:
        await backend.save_namespace(record)
    vectors = encoder.encode([memory.content for memory in memories])
    keywords = [KeywordEncoder().document(memory.content) for memory in memories]
    await backend.transfer.upsert_memories(list(zip(memories, vectors, strict=True)), keywords)
    embedder = BatchingEmbedder(encoder)
    await MemoryService(backend, embedder, KeywordEncoder(), clock=lambda: NOW).sweep()


async def export_bytes(backend: VectorBackend, fingerprint: str) -> bytes:
    buffer = io.BytesIO()

    async def write(data: bytes) -> None:
        buffer.write(data)

    header = jsonl.Header(fingerprint, backend.dimension, NOW, backend.name)
    await stream_export(backend, header, write, lambda: NOW)
    return buffer.getvalue()


async def import_bytes(
    data: bytes, backend: VectorBackend, encoder: SentenceTransformerEncoder | None = None
) -> StoreWriter:
    lines = jsonl.parse_lines(iter(io.BytesIO(data)))
    header = next(lines)
    assert isinstance(header, jsonl.Header)
    embed = None if encoder is None else export_import.embedder(encoder)
    writer = StoreWriter(backend, NOW, embed, KeywordEncoder(), batch=50)
    await import_lines(lines, writer, reuse_vectors=encoder is None)
    return writer


async def searches(
    backend: VectorBackend, encoder: SentenceTransformerEncoder, mode: SearchMode | None = None
) -> list[Any]:
    """Every query over every namespace, as (namespace, id, content, pin, score) rows; ranked
    as `mode` says, by default what the backend's default ranks by when it does not rerank
    (hybrid on Qdrant, dense on Pinecone)."""
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    chosen = choose_ranking(mode, backend)
    mode = chosen.dimmed or chosen.best
    ranking = Ranking(mode)
    service = MemoryService(
        backend, embedder, KeywordEncoder(), ranking=ranking, deadline_s=30, clock=lambda: NOW
    )
    results = []
    try:
        for query in QUERIES:
            for names in ([*NAMES, "custom:gone"], NAMES[:1]):
                request = SearchRequest(namespaces=names, query=query, limit=100)
                hits = (await service.searches.search(request, NOBODY)).hits
                if query and mode is not SearchMode.DENSE:  # exact ties (same words): any order
                    hits.sort(key=lambda h: (-h.memory.pin, -(h.score or 0), h.memory.id))
                results.append([(h.memory, _score(h.score, mode)) for h in hits])
    finally:
        await embedder.close()
    return results


def _score(score: float | None, mode: SearchMode) -> object:
    """Cosine to float32 precision. BM25 to 1 %: its IDF counts what a store holds on disk,
    and a source store still counts deleted points until it is vacuumed."""
    if score is None:
        return None
    return (
        pytest.approx(score, abs=2e-6)
        if mode is SearchMode.DENSE
        else pytest.approx(score, rel=1e-2)
    )


def same_export(found: bytes, expected: bytes) -> bool:
    """Equal but for the header, line order (each store's own) and the vectors' last bits
    (a store may re-normalise a unit vector)."""

    def parsed(data: bytes) -> tuple[list[Any], dict[str, list[float]]]:
        rows, vectors = [], {}
        for line in data.splitlines()[1:]:
            row = json.loads(line)
            if "vector" in row:
                vectors[f"{row['namespace']}/{row['id']}"] = jsonl.decode_vector(row.pop("vector"))
            rows.append(row)
        return sorted(rows, key=json.dumps), vectors

    found_rows, found_vectors = parsed(found)
    rows, vectors = parsed(expected)
    assert found_rows == rows
    assert found_vectors.keys() == vectors.keys()
    for key, vector in vectors.items():
        assert found_vectors[key] == pytest.approx(vector, abs=1e-6), key
    return True
