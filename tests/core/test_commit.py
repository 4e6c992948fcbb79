"""`MemoryService.commit`: the existence check of an explicit id, and the model.

The check comes first: when it fails, the caller sees its failure and the model was
not asked. When it finds the same content stored under that id, the stored vector is
reused and the model is not asked either; a content change racing its own retry
still pairs every stored content with its own vector.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import AsyncIterator
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import BackendUnavailable
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from plugin.core.new_ids import NewIds
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.embedding_tokens import Embedding
from plugin.http.wire import MemoryWrite
from plugin.http.wire import NamespaceUpsert
from tests.support.encoders import GatedEncoder

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MEMORY_ID = "11111111-2222-4333-8444-555555555555"


async def test_a_failed_existence_check_never_reaches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = QdrantEdgeBackend(3, tmp_path)
    encoder = GatedEncoder()
    encoder.gate.set()
    embedder = BatchingEmbedder(encoder)
    await backend.start()
    await embedder.start()
    try:
        await backend.save_namespace(NamespaceRecord("workspace:w", "workspace", NOW, None, None))
        service = MemoryService(backend, embedder, KeywordEncoder(), clock=lambda: NOW)

        async def lookup_down(namespace: str, memory_id: str, **_: Any) -> MemoryRecord | None:
            raise BackendUnavailable("store down for this test")

        monkeypatch.setattr(backend, "get_memory", lookup_down)
        body = MemoryWrite.model_validate(
            {"content": "never embedded", "kind": "fact", "source": "agent", "id": MEMORY_ID}
        )
        with pytest.raises(BackendUnavailable, match="store down"):
            await service.commit("workspace:w", body)
        monkeypatch.undo()
        # The next commit runs alone: the failed one's text never reached the model.
        body = body.model_copy(update={"content": "embedded"})
        stored = await service.commit("workspace:w", body)
    finally:
        await embedder.close()
        await backend.close()
    assert stored.id == MEMORY_ID
    assert encoder.batches == [["embedded"]]


# -- an unchanged memory costs no model call ---------------------------------------------


def vector_of(text: str) -> list[float]:
    """A unit vector of its own for every text (what the stand-in model computes)."""
    digest = hashlib.sha256(text.encode()).digest()
    raw = [digest[0] + 1.0, digest[1] + 1.0, digest[2] + 1.0]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


class WordsEncoder:
    """Records every text it is asked to embed; blocks on texts in `held` until released."""

    dimension = 3
    token_dimension = 3  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "words/test"
    parallelism = 1
    inline_lone_text = False  # it blocks: never on the event loop

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.held: set[str] = set()
        self.released = threading.Event()

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        if self.held & set(texts):
            self.released.wait(5)
        return [vector_of(text) for text in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        return [Embedding(vector) for vector in self.encode(texts)]

    embed_lone = embed


def write(content: str, **fields: object) -> MemoryWrite:
    body = {"content": content, "kind": "fact", "source": "agent", "id": MEMORY_ID, **fields}
    return MemoryWrite.model_validate(body)


@pytest.fixture
async def words(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[MemoryService, WordsEncoder, list[int]]]:
    """A service whose stored vectors are of the model's space (a test may say they are
    not, by parametrizing this fixture with False)."""
    verified: bool = getattr(request, "param", True)
    backend = QdrantEdgeBackend(3, tmp_path)
    encoder = WordsEncoder()
    embedder = BatchingEmbedder(encoder)
    reused: list[int] = []
    await backend.start()
    await embedder.start()
    await backend.save_namespace(NamespaceRecord("workspace:w", "workspace", NOW, None, None))
    service = MemoryService(
        backend,
        embedder,
        KeywordEncoder(),
        clock=lambda: NOW,
        vectors_verified=lambda: verified,
        on_reused=lambda: reused.append(1),
    )
    try:
        yield service, encoder, reused
    finally:
        encoder.released.set()
        await embedder.close()
        await backend.close()


async def stored_vector(service: MemoryService) -> tuple[str, list[float]]:
    found = await service.backend.get_stored_memory("workspace:w", MEMORY_ID)
    assert found is not None
    return found[0].content, found[1]


async def test_an_unchanged_memory_costs_no_model_call(
    words: tuple[MemoryService, WordsEncoder, list[int]],
) -> None:
    service, encoder, reused = words
    await service.commit("workspace:w", write("alpha"))
    again = await service.commit("workspace:w", write("alpha", kind="summary", pin=True))
    assert encoder.texts == ["alpha"]  # the second commit did not reach the model
    assert reused == [1]
    assert (again.kind, again.pin) == ("summary", True)  # the other fields did change
    assert await service.backend.get_memory("workspace:w", MEMORY_ID) == again
    content, vector = await stored_vector(service)
    assert (content, vector) == ("alpha", pytest.approx(vector_of("alpha"), abs=1e-6))
    writes: list[MemoryRecord] = []
    upsert = service.backend.upsert_memory

    async def counted(memory: MemoryRecord, vectors: MemoryVectors) -> None:
        writes.append(memory)
        await upsert(memory, vectors)

    service.backend.upsert_memory = counted  # type: ignore[method-assign]
    same = await service.commit("workspace:w", write("alpha", kind="summary", pin=True))
    assert (same, writes, reused) == (again, [], [1, 1])  # stored exactly so: no write at all
    await service.commit("workspace:w", write("beta"))  # changed content: embedded again
    assert encoder.texts == ["alpha", "beta"]
    content, vector = await stored_vector(service)
    assert (content, vector) == ("beta", pytest.approx(vector_of("beta"), abs=1e-6))
    await service.commit("workspace:w", write("gamma", id=None))  # no id: nothing to reuse
    assert encoder.texts == ["alpha", "beta", "gamma"]


@pytest.mark.parametrize("words", [False], indirect=True)
async def test_without_a_verified_vector_space_every_commit_is_embedded(
    words: tuple[MemoryService, WordsEncoder, list[int]],
) -> None:
    service, encoder, reused = words
    for _ in range(2):
        await service.commit("workspace:w", write("alpha"))
    assert (encoder.texts, reused) == (["alpha", "alpha"], [])


async def test_a_content_change_racing_its_own_retry_keeps_each_content_with_its_vector(
    words: tuple[MemoryService, WordsEncoder, list[int]],
) -> None:
    """`beta` is being embedded when the retry of `alpha` (stored) comes in and reuses its
    stored vector; whichever write lands last, the stored content has its own vector."""
    service, encoder, _ = words
    await service.commit("workspace:w", write("alpha"))
    encoder.held.add("beta")
    change = asyncio.create_task(service.commit("workspace:w", write("beta")))
    await asyncio.sleep(0.05)  # beta is inside the model now
    await service.commit("workspace:w", write("alpha"))  # the retry: reused, written first
    assert await stored_vector(service) == ("alpha", pytest.approx(vector_of("alpha"), abs=1e-6))
    encoder.released.set()
    await change  # the change lands last, with its own vector
    assert await stored_vector(service) == ("beta", pytest.approx(vector_of("beta"), abs=1e-6))
    await service.commit("workspace:w", write("alpha"))  # and back: alpha is embedded again
    assert encoder.texts == ["alpha", "beta", "alpha"]
    assert await stored_vector(service) == ("alpha", pytest.approx(vector_of("alpha"), abs=1e-6))


# -- ids a namespace created by this process never held: no lookup ----------------------


def lookups_of(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids the store is asked for from now on."""
    asked: list[str] = []
    backend = service.backend
    get_stored, get_memory = backend.get_stored_memory, backend.get_memory

    async def stored(namespace: str, memory_id: str, **kwargs: Any) -> Any:
        asked.append(memory_id)
        return await get_stored(namespace, memory_id, **kwargs)

    async def memory(namespace: str, memory_id: str, **kwargs: Any) -> Any:
        asked.append(memory_id)
        return await get_memory(namespace, memory_id, **kwargs)

    monkeypatch.setattr(backend, "get_stored_memory", stored)
    monkeypatch.setattr(backend, "get_memory", memory)
    return asked


async def test_an_id_new_to_a_namespace_created_here_is_not_looked_up(
    words: tuple[MemoryService, WordsEncoder, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, encoder, reused = words
    await service.upsert_namespace("workspace:new", NamespaceUpsert(kind="workspace"))
    asked = lookups_of(service, monkeypatch)
    first = await service.commit("workspace:new", write("alpha"))
    assert asked == []
    later = NOW + timedelta(minutes=5)
    service.clock = lambda: later
    again = await service.commit("workspace:new", write("alpha", pin=True))
    assert asked == [MEMORY_ID]  # sent once: it may be held, so it is looked up
    assert (again.created_at, again.position, first.position) == (NOW, 0, 0)
    assert encoder.texts == ["alpha"]
    assert reused == [1]
    await service.commit("workspace:w", write("beta"))  # created before: looked up
    assert asked == [MEMORY_ID, MEMORY_ID]


async def test_a_namespace_deleted_and_created_again_is_new_again(
    words: tuple[MemoryService, WordsEncoder, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _, _ = words
    await service.upsert_namespace("workspace:new", NamespaceUpsert(kind="workspace"))
    await service.commit("workspace:new", write("alpha"))
    await service.delete_namespace("workspace:new")
    asked = lookups_of(service, monkeypatch)
    await service.upsert_namespace("workspace:new", NamespaceUpsert(kind="workspace"))
    other = "99999999-2222-4333-8444-555555555555"
    stored = await service.commit("workspace:new", write("beta", id=other))
    await service.commit("workspace:new", write("gamma"))  # sent to the old one: looked up
    assert asked == [MEMORY_ID]
    assert await service.backend.get_memory("workspace:new", other) == stored


async def test_a_store_with_other_writers_is_always_looked_up(
    words: tuple[MemoryService, WordsEncoder, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _, _ = words
    service.new_ids = NewIds(enabled=False)  # as for a Qdrant server or Pinecone
    await service.upsert_namespace("workspace:new", NamespaceUpsert(kind="workspace"))
    asked = lookups_of(service, monkeypatch)
    await service.commit("workspace:new", write("alpha"))
    assert asked == [MEMORY_ID]


def test_new_ids_forget_only_what_they_are_told() -> None:
    ids = NewIds(enabled=True, bits=1 << 10)
    assert not ids.never_held("workspace:a", "m1")  # not created here
    ids.started("workspace:a")
    assert ids.never_held("workspace:a", "m1")
    ids.sending("workspace:a", "m1")
    assert not ids.never_held("workspace:a", "m1")
    assert ids.never_held("workspace:a", "m2")
    ids.sending("workspace:b", "m2")  # not created here: nothing kept
    assert ids.never_held("workspace:a", "m2")
    ids.forget("workspace:a")
    assert not ids.never_held("workspace:a", "m2")
    assert not NewIds(enabled=False).never_held("workspace:a", "m1")
