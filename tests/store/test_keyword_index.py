"""The keyword index across versions and crashes (plugin/embedding/keyword_index.py).

A store written by the previous version (no keyword vectors, no record of an
encoder) is upgraded in place: its memories get keyword vectors from their
stored content, nothing else changes, and a `kill -9` in the middle loses nothing
(the next start finishes). A store indexed by another encoder configuration is
re-indexed, never mixed. Then the real server does it at start, over HTTP.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import qdrant_edge as qe

from adapters.base import NamespaceRecord, SearchQuery
from adapters.errors import BackendUnavailable
from adapters.qdrant.edge import QdrantEdgeBackend
from adapters.qdrant.edge_records import RecordStore
from adapters.qdrant.edge_shard import edge_config
from adapters.qdrant.layout import memory_to_payload, point_id
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from plugin.core.fingerprint import META_KEY
from plugin.embedding import keyword_index
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.embedding.keyword_index import BUILDING, COMPLETE, META_ENCODER, META_STATE
from plugin.embedding.keywords import KeywordEncoder
from tests.support.pinecone import pinecone_backend
from tests.support.pinecone_fake import FakePinecone
from tests.support.records import DIM, T0, everything, memory, unit
from tests.support.server_process import REPO_ROOT, ServerProcess

NAMES = ["workspace:one", "team:two"]
PER_NAMESPACE = 300
RARE = "ticket XJ-4471 was escalated to finance"


def contents(name: str) -> list[str]:
    rows = [f"{name} note {index} about the weekly planning" for index in range(PER_NAMESPACE)]
    rows[7] = RARE
    return rows


def write_previous_version(data: Path, vectors: Any = None) -> None:
    """A data directory as the version before keyword vectors left it: a shard without a
    sparse vector, namespace records, and store metadata naming only the embedding."""
    root = data / "store"
    root.mkdir(parents=True)
    records = RecordStore(root / "namespaces.sqlite3")
    records.open()
    old = edge_config(DIM if vectors is None else vectors.dimension)
    config = qe.EdgeConfig(vectors=old.vectors, max_search_threads=1, optimizers=old.optimizers)
    shard = qe.EdgeShard.create(str(root / "memories"), config)
    for name in NAMES:
        epoch = records.save(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        texts = contents(name)
        dense = (
            [unit(1, i / 100) for i in range(len(texts))]
            if vectors is None
            else (vectors.encode(texts))
        )
        points = [
            qe.Point(point_id(name, m.id), vector, memory_to_payload(m, epoch))
            for text, vector in zip(texts, dense, strict=True)
            for m in [memory(name, content=text)]
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    fingerprint = "all-MiniLM-L6-v2/torch" if vectors is not None else "test/synthetic"
    records.set_meta(META_KEY, fingerprint)
    shard.flush()
    shard.close()
    records.close()


def stored_keywords(store: QdrantEdgeBackend) -> dict[str, tuple[str, Any]]:
    """Every point's content with its stored keyword vector (None when it has none)."""
    found: dict[str, tuple[str, Any]] = {}
    for shard in store._shards.open_shards():
        offset = None
        while True:
            page, offset = shard.scroll(
                qe.ScrollRequest(offset=offset, limit=256, with_payload=True, with_vector=True)
            )
            for point in page:
                vectors = point.vector if isinstance(point.vector, dict) else {}
                found[str(point.id)] = (point.payload["content"], vectors.get(KEYWORDS_VECTOR))
            if offset is None:
                break
    return found


def matches(stored: Any, expected: Any) -> bool:
    return stored is not None and (list(stored.indices), list(stored.values)) == (
        list(expected.indices),
        pytest.approx(list(expected.values), rel=1e-6),
    )


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    write_previous_version(tmp_path)
    return tmp_path


async def test_a_previous_version_store_is_indexed_in_place(old_store: Path) -> None:
    store = QdrantEdgeBackend(DIM, old_store)
    await store.start()
    try:
        before = await store.query_memories(NAMES, SearchQuery(unit(1)), everything(), 100)
        assert all(v is None for _, v in stored_keywords(store).values())
        encoder = KeywordEncoder()
        report = await keyword_index.index_store(store, encoder)
        assert report is not None
        assert report.indexed == len(NAMES) * PER_NAMESPACE
        meta = await store.read_store_meta()
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
        again = await keyword_index.index_store(store, encoder)  # the next start
        assert again is not None
        assert again.indexed == 0
    finally:
        await store.close()


_KILLED_MID_FILL = """
import asyncio, os, signal
from adapters.qdrant.edge import QdrantEdgeBackend
from plugin.embedding import keyword_index
from plugin.embedding.keywords import KeywordEncoder
from tests.support.records import DIM

pages = []

def progress(count):
    pages.append(count)
    if len(pages) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

async def main():
    store = QdrantEdgeBackend(DIM, {data!r})
    await store.start()
    encoder = KeywordEncoder()
    assert await keyword_index.prepare(store, encoder)
    await keyword_index.fill(store, encoder, page=100, progress=progress)

asyncio.run(main())
"""


def kill_mid_fill(data: Path) -> None:
    code = _KILLED_MID_FILL.format(data=str(data))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr


async def test_kill_9_in_the_middle_of_the_upgrade(old_store: Path) -> None:
    kill_mid_fill(old_store)
    store = QdrantEdgeBackend(DIM, old_store)
    await store.start()
    try:
        encoder = KeywordEncoder()
        meta = await store.read_store_meta()
        assert (meta[META_ENCODER], meta[META_STATE]) == (encoder.identity, BUILDING)
        stored = stored_keywords(store)
        done = [v for _, v in stored.values() if v is not None]
        assert 200 <= len(done) < len(stored)  # two pages made it, not all
        # Meanwhile everything is served; indexed memories are found by their words.
        listed = await store.list_memories(NAMES, everything(), 100)
        assert len(listed) == 100
        report = await keyword_index.index_store(store, encoder)
        assert report is not None
        assert report.indexed == len(stored) - len(done)
        assert (await store.read_store_meta())[META_STATE] == COMPLETE
        for content, vector in stored_keywords(store).values():
            assert matches(vector, encoder.document(content)), content
    finally:
        await store.close()


async def test_another_encoder_configuration_is_reindexed_never_mixed(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        first, second = KeywordEncoder(), KeywordEncoder(k1=2.0, b=0.5)
        assert first.identity != second.identity
        assert await keyword_index.index_store(store, first) is not None
        await store.save_namespace(NamespaceRecord(name=NAMES[0], kind="org", created_at=T0))
        for text in contents(NAMES[0])[:50]:
            await store.upsert_memory(memory(NAMES[0], content=text), unit(1), first.document(text))
        report = await keyword_index.index_store(store, second)
        assert report is not None
        assert report.indexed == 50
        meta = await store.read_store_meta()
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
            await store.upsert_memory(memory(NAMES[0], content=text), unit(1), old.document(text))
        await store.write_store_meta(META_STATE, keyword_index.RESETTING)
        await store.write_store_meta(META_ENCODER, new.identity)
        await keyword_index.index_store(store, new)
        for content, vector in stored_keywords(store).values():
            assert matches(vector, new.document(content)), content
    finally:
        await store.close()


class FlakyStore(QdrantEdgeBackend):
    """Unavailable for the first `failures` reads of its metadata."""

    failures = 2

    async def read_store_meta(self) -> Any:
        if self.failures:
            self.failures -= 1
            raise BackendUnavailable("not yet")
        return await super().read_store_meta()


async def test_the_background_indexer_waits_for_the_store(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_index, "RETRY_S", 0.01)
    store = FlakyStore(DIM, old_store)
    await store.start()
    counted: list[int] = []
    try:
        await asyncio.wait_for(
            keyword_index.maintain_in_background(store, KeywordEncoder(), counted.append), 30
        )
        assert sum(counted) == len(NAMES) * PER_NAMESPACE
        assert (await store.read_store_meta())[META_STATE] == COMPLETE
    finally:
        await store.close()


async def test_a_backend_without_keyword_vectors_is_left_alone() -> None:
    with FakePinecone(dimension=DIM).mocked() as fake:
        backend = pinecone_backend(fake)
        await backend.start()
        try:
            assert await keyword_index.index_store(backend, KeywordEncoder()) is None
            assert META_ENCODER not in await backend.read_store_meta()
        finally:
            await backend.close()


# -- the real server, over HTTP ---------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path / "data", tmp_path / "server.log") as process:
        yield process


@pytest.mark.slow
def test_the_server_upgrades_a_previous_version_store_killed_midway(
    server: ServerProcess, encoder: SentenceTransformerEncoder
) -> None:
    """The store of the previous version, its upgrade killed by SIGKILL after two pages:
    the server starts on it, serves at once, and finishes the keyword index itself."""
    write_previous_version(server.data_dir, encoder)
    kill_mid_fill(server.data_dir)
    server.start()
    server.wait_healthy()

    async def search(session: aiohttp.ClientSession) -> list[str]:
        body = {"namespaces": NAMES, "query": "what happened to XJ-4471?", "limit": 2}
        async with session.post(f"{server.base_url}/v1/search", json=body) as response:
            assert response.status == 200
            return [hit["content"] for hit in (await response.json())["memories"]]

    async def until_indexed() -> list[str]:
        # A deadline, not a count of tries: on a loaded machine the server's start and
        # fill share two cores with everything else (200 tries once ran out).
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as session:
            while (found := await search(session)) != [RARE, RARE]:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            return found

    assert asyncio.run(until_indexed()) == [RARE, RARE]
    assert server.terminate() == 0
    store = QdrantEdgeBackend(encoder.dimension, server.data_dir)

    async def state() -> dict[str, str]:
        await store.start()
        try:
            assert all(v is not None for _, v in stored_keywords(store).values())
            return dict(await store.read_store_meta())
        finally:
            await store.close()

    assert asyncio.run(state())[META_STATE] == COMPLETE
