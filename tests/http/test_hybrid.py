"""Search modes through the whole app with the real model: rerank, feedback, hybrid, dense,
keyword.

The memories are a support team's, and the question names a ticket by its number:
the words find it where the sentence model, reading a long memory about a weekend,
ranks closer paraphrases about tickets first (docs/backends.md, "Hybrid search").
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from adapters.errors import BackendMisconfigured
from adapters.pinecone import PineconeBackend
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import SearchMode
from adapters.values import SearchQuery
from harness.clocks import WallClock
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from plugin.core.search_mode import Ranking
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.keys import EMBEDDER
from plugin.http.keys import RANKING
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import served
from tests.support.qdrant_local import stored_points

NS = "workspace:helpdesk"
TARGET = (
    "We spent the whole weekend painting the living room, the kids helped and it looks so"
    " bright now. Also the support ticket for the router is XJ-4471."
)
OTHERS = [
    "the user's internet router keeps dropping the connection",
    "support said the router issue would be fixed this week",
    "the user opened a ticket with the internet provider",
    "the router was replaced by the provider last year",
    "the user asked support to send a technician for the router",
    "the internet provider's support line is busy in the evenings",
    "a support ticket usually takes three days to resolve",
    "the user prefers chat support over phone calls",
]
QUESTION = "status of ticket XJ-4471"


async def seeded(api: ContractClient) -> None:
    assert (await api.put_ns(NS)).status == 200
    for content in [TARGET, *OTHERS]:
        assert (await api.commit(NS, content)).status == 201


@pytest.mark.parametrize("mode", ["rerank", "feedback", "hybrid", "dense", "keyword"])
async def test_each_mode_ranks_as_documented(
    make_app: AppFactory, clock: WallClock, mode: str
) -> None:
    async for api in served(make_app, clock, search=mode):
        assert api.app[RANKING] == Ranking(SearchMode(mode))
        await seeded(api)
        reply = await api.search(NS, query=QUESTION, limit=5)
        assert reply.status == 200
        found = [m["content"] for m in reply.body["memories"]]
        scores = [m["score"] for m in reply.body["memories"]]
        assert scores == sorted(scores, reverse=True)
        if mode == "dense":  # the model prefers the short paraphrases about tickets
            assert found[0] != TARGET
            assert all(-1.0 <= s <= 1.0 + 1e-6 for s in scores)
        else:
            assert found[0] == TARGET
        if mode == "keyword":  # only what shares a word with the question, BM25 > 0
            assert set(found) == {TARGET, OTHERS[2], OTHERS[6]}
            assert all(s > 0 for s in scores)
        if mode == "rerank":  # the fused score plus 4 x a mean MaxSim in [-1, 1]
            assert scores[0] > 1.0
        listing = await api.search(NS, limit=100)  # no query: newest first, as ever
        assert [m["score"] for m in listing.body["memories"]] == [None] * 9


async def test_the_default_reranks_dimmed_to_hybrid_and_only_a_rerank_keeps_token_vectors(
    make_app: AppFactory, clock: WallClock
) -> None:
    """Unset, the embedded store reranks while the plugin has room (the rerank dimmer);
    a forced ranking without a rerank computes and keeps no token vectors."""
    async for api in served(make_app, clock):
        assert api.app[RANKING] == Ranking(SearchMode.RERANK, SearchMode.HYBRID)
        assert api.app[EMBEDDER].keep_tokens is True
    async for api in served(make_app, clock, search="rerank"):
        assert api.app[RANKING] == Ranking(SearchMode.RERANK)
        assert api.app[EMBEDDER].keep_tokens is True
    for forced in ("hybrid", "feedback"):
        async for api in served(make_app, clock, search=forced):
            assert api.app[RANKING] == Ranking(SearchMode(forced))
            assert api.app[EMBEDDER].keep_tokens is False


@pytest.mark.parametrize("layout", [QdrantServerBackend, QdrantCollectionsBackend])
async def test_rerank_on_a_qdrant_server_keeps_token_vectors_and_ranks_by_them(
    make_app: AppFactory,
    clock: WallClock,
    layout: type[QdrantServerLayout],
    encoder: SentenceTransformerEncoder,
) -> None:
    """Both server layouts (qdrant-client's local mode): each commit's token vectors come
    from its one model call, and the search reranks by them."""
    backend = layout(384, location=":memory:", tokens=True, token_dimension=encoder.token_dimension)
    asked: list[SearchQuery] = []
    query_memories = backend.query_memories

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[1])
        return await query_memories(*args, **kwargs)

    backend.query_memories = recorded  # type: ignore[method-assign]
    async for api in served(make_app, clock, backend=backend, search="rerank"):
        assert api.app[RANKING] == Ranking(SearchMode.RERANK)
        await seeded(api)
        reply = await api.search(NS, query=QUESTION, limit=5)
        assert [query.feedback for query in asked] == [False]  # no second pass there
        assert reply.body["memories"][0]["content"] == TARGET
        assert reply.body["memories"][0]["score"] > 1.0  # fused + 4 x a mean MaxSim
        collections = await backend.connection.call(lambda c: c.get_collections())
        memories = [c.name for c in collections.collections if c.name.startswith("memory-")]
        points = {}
        for name in memories:
            points.update(await stored_points(backend.connection, name))
        tokens = [v[TOKENS_VECTOR] for p, v in points.values() if "content" in (p or {})]
        assert len(tokens) == 9
        assert all(
            len(rows) > 3 and len(rows[0]) == encoder.token_dimension == 128 for rows in tokens
        )


async def test_a_dotproduct_pinecone_index_defaults_to_hybrid(
    make_app: AppFactory, clock: WallClock
) -> None:
    with FakePinecone(dimension=384, metric="dotproduct").mocked() as fake:
        backend = pinecone_backend(fake)
        async for api in served(make_app, clock, backend=backend):
            assert api.app[RANKING] == Ranking(SearchMode.HYBRID)
            await seeded(api)
            reply = await api.search(NS, query=QUESTION, limit=3)
            assert reply.status == 200
            assert reply.body["memories"][0]["content"] == TARGET


async def test_pinecone_defaults_to_dense_and_refuses_other_modes(
    make_app: AppFactory, clock: WallClock
) -> None:
    with FakePinecone(dimension=384).mocked() as fake:

        def pinecone() -> PineconeBackend:
            return pinecone_backend(fake)

        async for api in served(make_app, clock, backend=pinecone()):
            assert api.app[RANKING] == Ranking(SearchMode.DENSE)
        for mode in ("rerank", "feedback", "hybrid", "keyword"):  # no multivectors, no second pass
            server = TestServer(make_app(backend=pinecone(), search=mode))
            with pytest.raises(BackendMisconfigured) as refused:
                await server.start_server()
            await server.close()
            assert str(refused.value) == (
                f"MEMORY_PLUGIN_SEARCH={mode} is not available on the pinecone backend"
                " (it answers: dense); unset it or choose one of those"
            )
