"""A rerank weighs query tokens by rarity once every memory has its wordpieces, and says so.

Real model, real embedded store, real HTTP. Memories stored without wordpieces (an encoder
that says no token ids stands for a version before them) leave health's `rerank_weights` at
`uniform`; a start with the real encoder fills them in and it says `idf`, with other scores;
a restart finds the same frequencies on disk and answers the same scores.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.values import PackedTokens
from harness.clocks import WallClock
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import SentenceTransformerEncoder
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import served

NS = "workspace:weights"
CONTENTS = [
    "Caroline went to the pottery class on Tuesday",
    "What did you think of the new bakery downtown?",
    "Caroline adopted a puppy from the shelter in Tampa",
    "Did you finish the report for the finance review?",
    "The pottery wheel in the studio is broken again",
    "What time does the library close on weekends?",
]
QUESTION = "What did Caroline make at the pottery class?"


async def token_fill_done(api: ContractClient) -> None:
    """Until the app's token fill has made its pass (it ends after one)."""
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "token index"]
    await asyncio.wait_for(asyncio.shield(task), 60)


async def weights_and_scores(api: ContractClient) -> tuple[str, list[tuple[str, float]]]:
    await token_fill_done(api)
    health = await api.call("GET", "/v1/health")
    found = await api.search(NS, query=QUESTION, limit=4)
    assert found.status == 200
    hits = [(m["content"], round(m["score"], 4)) for m in found.body["memories"]]
    return health.body["rerank_weights"], hits


async def test_weights_follow_the_stored_wordpieces_and_survive_a_restart(
    make_app: AppFactory,
    clock: WallClock,
    encoder: SentenceTransformerEncoder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_embed = encoder.embed

    def without_ids(texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        found = real_embed(texts, tokens=tokens)
        return [
            Embedding(e.vector, PackedTokens(e.tokens.array()))
            if isinstance(e.tokens, PackedTokens)
            else e
            for e in found
        ]

    with monkeypatch.context() as patched:
        patched.setattr(encoder, "embed", without_ids)
        async for api in served(make_app, clock):
            assert (await api.put_ns(NS)).status == 200
            for content in CONTENTS:
                assert (await api.commit(NS, content)).status == 201
        async for api in served(make_app, clock):  # the fill finds them, and no ids again
            uniform, plain = await weights_and_scores(api)
    async for api in served(make_app, clock):
        weighed, by_idf = await weights_and_scores(api)
    async for api in served(make_app, clock):
        again, restarted = await weights_and_scores(api)
    assert (uniform, weighed, again) == ("uniform", "idf", "idf")
    assert by_idf != plain
    assert restarted == by_idf
