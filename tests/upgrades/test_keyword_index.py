"""The keyword index across versions (plugin/upgrades/vector_fill.py).

A store written by the previous version (no keyword vectors, no record of an
encoder) is upgraded in place: its memories get keyword vectors from their
stored content and nothing else changes (a `kill -9` in the middle:
test_keyword_index_crash.py). A store indexed by another encoder configuration is
re-indexed, never mixed. The previous version's store: tests/support/keyword_store.py.
"""

from __future__ import annotations

import asyncio
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import EdgeStoreMeta
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import BackendUnavailable
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from plugin.core.fingerprint import META_KEY
from plugin.upgrades import vector_fill
from plugin.upgrades.vector_fill import COMPLETE
from plugin.upgrades.vector_fill import META_ENCODER
from plugin.upgrades.vector_fill import META_STATE
from tests.support.keyword_store import NAMES
from tests.support.keyword_store import PER_NAMESPACE
from tests.support.keyword_store import RARE
from tests.support.keyword_store import contents
from tests.support.keyword_store import matches
from tests.support.keyword_store import stored_keywords
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

KEYWORDS = vector_fill.keywords(KeywordEncoder())


async def test_a_previous_version_store_is_indexed_in_place(old_store: Path) -> None:
    store = QdrantEdgeBackend(DIM, old_store)
    await store.start()
    try:
        before = await store.query_memories(NAMES, SearchQuery(unit(1)), everything(), 100)
        assert all(v is None for _, v in stored_keywords(store).values())
        encoder = KeywordEncoder()
        report = await vector_fill.fill_store(store, vector_fill.keywords(encoder))
        assert report is not None
        assert report.indexed == len(NAMES) * PER_NAMESPACE
        meta = await store.store_meta.read_store_meta()
        assert (meta[META_ENCODER], meta[META_STATE]) == (encoder.identity, COMPLETE)
        assert meta[META_KEY] == "test/synthetic"  # the embedding record is untouched
        for content, stored in stored_keywords(store).values():
            assert matches(stored, encoder.document(content)), content
        # Dense vectors and payloads as they were: the same dense answer.
        after = await store.query_memories(NAMES, SearchQuery(unit(1)), everything(), 100)
        assert after == before
        hybrid = SearchQuery(unit(1), encoder.query("XJ-4471"))
        found = await store.query_memories(NAMES, hybrid, everything(), 2)
        assert [h.memory.content for h in found] == [RARE, RARE]
        again = await vector_fill.fill_store(store, vector_fill.keywords(encoder))  # the next start
        assert again is not None
        assert again.indexed == 0
    finally:
        await store.close()


async def test_another_encoder_configuration_is_reindexed_never_mixed(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        first, second = KeywordEncoder(), KeywordEncoder(k1=2.0, b=0.5)
        assert first.identity != second.identity
        assert await vector_fill.fill_store(store, vector_fill.keywords(first)) is not None
        await store.save_namespace(NamespaceRecord(name=NAMES[0], kind="org", created_at=T0))
        for text in contents(NAMES[0])[:50]:
            await store.upsert_memory(
                memory(NAMES[0], content=text), MemoryVectors(unit(1), first.document(text))
            )
        report = await vector_fill.fill_store(store, vector_fill.keywords(second))
        assert report is not None
        assert report.indexed == 50
        meta = await store.store_meta.read_store_meta()
        assert (meta[META_ENCODER], meta[META_STATE]) == (second.identity, COMPLETE)
        for content, vector in stored_keywords(store).values():
            assert matches(vector, second.document(content)), content
    finally:
        await store.close()


async def test_a_reset_cut_short_is_repeated(tmp_path: Path) -> None:
    """Killed after recording the new encoder but before dropping the old vectors: the next
    start drops them anyway (the state says `resetting`), so none of the old survive."""
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        old, new = KeywordEncoder(k1=2.0), KeywordEncoder()
        await store.save_namespace(NamespaceRecord(name=NAMES[0], kind="org", created_at=T0))
        for text in contents(NAMES[0])[:20]:
            await store.upsert_memory(
                memory(NAMES[0], content=text), MemoryVectors(unit(1), old.document(text))
            )
        await store.store_meta.write_store_meta(META_STATE, vector_fill.RESETTING)
        await store.store_meta.write_store_meta(META_ENCODER, new.identity)
        await vector_fill.fill_store(store, vector_fill.keywords(new))
        for content, vector in stored_keywords(store).values():
            assert matches(vector, new.document(content)), content
    finally:
        await store.close()


class FlakyMeta(EdgeStoreMeta):
    """Unavailable for the first `failures` reads of the store's metadata."""

    failures = 2

    async def read_store_meta(self) -> Any:
        if self.failures:
            self.failures -= 1
            raise BackendUnavailable("not yet")
        return await super().read_store_meta()


class FlakyStore(QdrantEdgeBackend):
    """A store whose metadata is unavailable at first."""

    @cached_property
    def store_meta(self) -> EdgeStoreMeta:
        return FlakyMeta(self.store)


async def test_the_background_indexer_waits_for_the_store(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_fill, "RETRY_S", 0.01)
    store = FlakyStore(DIM, old_store)
    await store.start()
    counted: list[int] = []
    try:
        await asyncio.wait_for(
            vector_fill.maintain_in_background(store, KEYWORDS, counted.append), 30
        )
        assert sum(counted) == len(NAMES) * PER_NAMESPACE
        assert (await store.store_meta.read_store_meta())[META_STATE] == COMPLETE
    finally:
        await store.close()


async def test_a_backend_without_keyword_vectors_is_left_alone() -> None:
    with FakePinecone(dimension=DIM).mocked() as fake:
        backend = pinecone_backend(fake)
        await backend.start()
        try:
            assert await vector_fill.fill_store(backend, KEYWORDS) is None
            assert META_ENCODER not in await backend.store_meta.read_store_meta()
        finally:
            await backend.close()
