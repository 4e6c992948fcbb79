"""Token vectors across versions (plugin/upgrades/vector_fill.py).

A store written by the version before token vectors (every memory with its dense and
keyword vectors, the keyword index complete) is upgraded in place: its memories get
the token vectors of their stored content, from the real model, and nothing else
changes. Meanwhile a rerank search answers as hybrid did (MaxSim counts 0 for a memory
without token vectors). An import (dense vectors only) is filled in the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant import token_codes
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.token_codes import TOKEN_CODES_VECTOR
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.scheduling.work import Work
from plugin.upgrades import vector_fill
from tests.support.keyword_store import NAMES
from tests.support.keyword_store import PER_NAMESPACE
from tests.support.keyword_store import RARE
from tests.support.keyword_store import stored_vectors
from tests.support.keyword_store import write_previous_version
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory

QUESTION = "what was escalated to finance?"


def stored_tokens(store: QdrantEdgeBackend) -> dict[str, tuple[str, Any]]:
    """Every point's content with its stored token vectors (None when it has none)."""
    return stored_vectors(store, TOKEN_CODES_VECTOR)


async def fill(store: QdrantEdgeBackend, embed: vector_fill.Embed) -> vector_fill.Filled:
    filled = await vector_fill.fill_store(store, vector_fill.tokens(embed))
    assert filled is not None
    return filled


@pytest.fixture
def embed(encoder: SentenceTransformerEncoder) -> vector_fill.Embed:
    async def one(text: str, work: Work) -> Embedding:
        return encoder.embed([text], tokens=True)[0]

    return one


@pytest.mark.long
async def test_a_store_of_the_version_before_gets_token_vectors_in_place(
    tmp_path: Path, encoder: SentenceTransformerEncoder, embed: vector_fill.Embed
) -> None:
    keywords = KeywordEncoder()
    write_previous_version(tmp_path, encoder, keywords)
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    try:
        query = encoder.embed([QUESTION], tokens=True)[0]
        hybrid = SearchQuery(query.vector, keywords.query(QUESTION))
        rerank = SearchQuery(query.vector, keywords.query(QUESTION), query.tokens)
        before = await store.query_memories(NAMES, hybrid, everything(), 20)
        assert all(rows is None for _, rows in stored_tokens(store).values())
        meanwhile = await store.query_memories(NAMES, rerank, everything(), 20)
        assert meanwhile == before  # searches are right while the fill has not run

        assert (await fill(store, embed)).indexed == len(NAMES) * PER_NAMESPACE
        for content, rows in stored_tokens(store).values():
            expected = encoder.embed([content], tokens=True)[0].tokens
            assert expected is not None
            assert rows is not None
            assert len(rows) == len(expected)
            assert rows == token_codes.encoded(expected)  # stored as bytes
        assert await store.query_memories(NAMES, hybrid, everything(), 20) == before
        reranked = await store.query_memories(NAMES, rerank, everything(), 20)
        assert [hit.memory.content for hit in reranked[:2]] == [RARE, RARE]
        assert [hit.score for hit in reranked] != [hit.score for hit in before]
        assert (await fill(store, embed)).indexed == 0  # the next start: nothing to do
    finally:
        await store.close()


@pytest.mark.long
async def test_a_development_builds_float16_token_vectors_give_way_to_byte_codes(
    tmp_path: Path, encoder: SentenceTransformerEncoder, embed: vector_fill.Embed
) -> None:
    keywords = KeywordEncoder()
    write_previous_version(tmp_path, encoder, keywords, float_tokens=True)
    configs = sorted((tmp_path / "store" / "shards").glob("*/edge_config.json"))
    assert any(TOKENS_VECTOR in json.loads(c.read_text())["vectors"] for c in configs)
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    try:
        for config in configs:
            vectors = json.loads(config.read_text())["vectors"]
            assert TOKENS_VECTOR not in vectors
            assert vectors[TOKEN_CODES_VECTOR]["datatype"] == "uint8"
        assert all(rows is None for _, rows in stored_tokens(store).values())
        filled = await fill(store, embed)
        assert filled.indexed == len(NAMES) * PER_NAMESPACE
        query = encoder.embed([QUESTION], tokens=True)[0]
        rerank = SearchQuery(query.vector, keywords.query(QUESTION), query.tokens)
        reranked = await store.query_memories(NAMES, rerank, everything(), 20)
        assert [hit.memory.content for hit in reranked[:2]] == [RARE, RARE]
    finally:
        await store.close()


async def test_token_codes_of_another_size_give_way_to_the_projections(
    tmp_path: Path, encoder: SentenceTransformerEncoder, embed: vector_fill.Embed
) -> None:
    """A store written with token vectors whole (the model's own size) opened with the
    encoder's projected size: the old codes go, and the fill writes codes of the
    projection's size that rank as they should."""
    projection, whole = encoder.projection, encoder.dimension
    assert projection is not None
    assert encoder.token_dimension < whole
    contents = (RARE, "the weekly sync moved to thursday")
    store = QdrantEdgeBackend(whole, tmp_path, token_dimension=whole)
    await store.start()
    encoder.projection = None
    try:
        await store.save_namespace(NamespaceRecord(name=NAMES[0], kind="workspace", created_at=T0))
        for content in contents:
            embedded = encoder.embed([content], tokens=True)[0]
            vectors = MemoryVectors(embedded.vector, None, embedded.tokens)
            await store.upsert_memory(memory(NAMES[0], content=content), vectors)
        widths = {len(row) for _, rows in stored_tokens(store).values() for row in rows or []}
        assert widths == {token_codes.code_dimension(whole)}
    finally:
        encoder.projection = projection
        await store.close()
    store = QdrantEdgeBackend(whole, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    try:
        assert all(rows is None for _, rows in stored_tokens(store).values())
        assert (await fill(store, embed)).indexed == len(contents)
        for content, rows in stored_tokens(store).values():
            expected = encoder.embed([content], tokens=True)[0].tokens
            assert expected is not None
            assert rows == token_codes.encoded(expected)
            assert {len(row) for row in rows} == {token_codes.code_dimension(128)}
        query = encoder.embed([QUESTION], tokens=True)[0]
        rerank = SearchQuery(query.vector, KeywordEncoder().query(QUESTION), query.tokens)
        reranked = await store.query_memories(NAMES[:1], rerank, everything(), 2)
        assert [hit.memory.content for hit in reranked] == list(contents)
    finally:
        await store.close()


async def test_a_store_reopened_keeps_its_token_vectors(
    tmp_path: Path, encoder: SentenceTransformerEncoder, embed: vector_fill.Embed
) -> None:
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    record = memory(NAMES[0], content=RARE)
    try:
        await store.save_namespace(NamespaceRecord(name=NAMES[0], kind="workspace", created_at=T0))
        embedded = encoder.embed([RARE], tokens=True)[0]
        await store.upsert_memory(record, MemoryVectors(embedded.vector, None, embedded.tokens))
        imported = memory(NAMES[0], content="an imported note")
        await store.transfer.upsert_memories([(imported, encoder.encode([imported.content])[0])])
    finally:
        await store.close()
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    try:
        held = {content: rows for content, rows in stored_tokens(store).values()}
        assert held[RARE] is not None
        assert held["an imported note"] is None
        assert (await fill(store, embed)).indexed == 1  # the import's
        assert all(rows is not None for _, rows in stored_tokens(store).values())
    finally:
        await store.close()
