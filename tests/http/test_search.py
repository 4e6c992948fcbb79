"""POST /v1/search: ranking, pin order, listing, filters, limits, TTL, namespaces."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.values import MemoryFilter
from adapters.values import SearchMode
from plugin.http.keys import RANKING
from plugin.http.keys import SERVICE
from tests.support.app import ContractClient

pytestmark = [pytest.mark.every_backend, pytest.mark.shares_server]

A = "workspace:alpha"
B = "team:beta"


@pytest.fixture
async def two(api: ContractClient) -> tuple[str, str]:
    await api.put_ns(A)
    await api.put_ns(B, "team")
    return A, B


def contents(reply: Any) -> list[str]:
    assert reply.status == 200
    return [m["content"] for m in reply.body["memories"]]


async def test_semantic_ranking_with_scores(api: ContractClient, two: tuple[str, str]) -> None:
    for text in [
        "the user prefers tabs over spaces for indentation",
        "the production database runs postgres 16",
        "lunch is usually at noon",
        "deployments are frozen on fridays",
    ]:
        await api.commit(A, text)
    reply = await api.search(A, query="indentation preferences")
    memories = reply.body["memories"]
    assert memories[0]["content"] == "the user prefers tabs over spaces for indentation"
    scores = [m["score"] for m in memories]
    assert scores == sorted(scores, reverse=True)
    # Cosine; hybrid adds weighted BM25 (docs/backends.md "Hybrid search"), which only raises it.
    assert all(s >= -1.0 for s in scores)
    if api.app[RANKING].best is SearchMode.DENSE:
        assert all(s <= 1.0 + 1e-6 for s in scores)
    assert scores[0] > scores[1] + 0.1
    ids = {m["id"] for m in memories}
    assert len(ids) == 4


async def test_pinned_first_then_score(api: ContractClient, two: tuple[str, str]) -> None:
    await api.commit(A, "the user prefers tabs over spaces")
    await api.commit(A, "the office plant needs water on mondays", pin=True)
    await api.commit(A, "indentation uses four spaces in python files")
    reply = await api.search(A, query="indentation preferences")
    assert contents(reply)[0] == "the office plant needs water on mondays"
    assert [m["pin"] for m in reply.body["memories"]] == [True, False, False]
    unpinned = [m["score"] for m in reply.body["memories"][1:]]
    assert unpinned == sorted(unpinned, reverse=True)


async def test_listing_pinned_first_then_newest(api: ContractClient, two: tuple[str, str]) -> None:
    for index, pin in enumerate([False, True, False, True, False]):
        await api.commit(A, f"memory {index}", pin=pin)
        api.clock.advance(seconds=1)
    for body in [{}, {"query": ""}, {"query": "   "}]:
        reply = await api.search(A, **body)
        assert contents(reply) == ["memory 3", "memory 1", "memory 4", "memory 2", "memory 0"]
        assert [m["score"] for m in reply.body["memories"]] == [None] * 5


async def test_kinds_filter(api: ContractClient, two: tuple[str, str]) -> None:
    for kind in ["fact", "summary", "checkpoint"]:
        await api.commit(A, f"a {kind}", kind=kind)
    assert sorted(contents(await api.search(A, kinds=["fact", "checkpoint"]))) == [
        "a checkpoint",
        "a fact",
    ]
    assert contents(await api.search(A, query="a", kinds=["summary"])) == ["a summary"]
    assert len(contents(await api.search(A, kinds=[]))) == 3


async def test_limits(api: ContractClient, two: tuple[str, str]) -> None:
    for index in range(25):
        await api.commit(A, f"note {index}")
    assert len(contents(await api.search(A))) == 20
    assert len(contents(await api.search(A, limit=0))) == 20
    assert len(contents(await api.search(A, limit=5))) == 5
    assert len(contents(await api.search(A, limit=100))) == 25
    assert len(contents(await api.search(A, query="note", limit=3))) == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"namespaces": [A], "limit": 101},
            "invalid body: limit: Input should be less than or equal to 100",
        ),
        (
            {"namespaces": [A], "limit": -1},
            "invalid body: limit: Input should be greater than or equal to 0",
        ),
        ({"namespaces": [A], "limit": "5"}, "invalid body: limit: Input should be a valid integer"),
        ({"namespaces": [A], "limit": 2.5}, "invalid body: limit: Input should be a valid integer"),
        (
            {"namespaces": []},
            "invalid body: namespaces: List should have at least 1 item after validation, not 0",
        ),
        ({"namespaces": A}, "invalid body: namespaces: Input should be a valid array"),
        ({}, "invalid body: namespaces: Field required"),
        (
            {"namespaces": ["nocolon"]},
            "invalid body: namespaces.0: Value error, namespace name "
            "must match ^[a-z]+:[A-Za-z0-9_:.\\-]+$",
        ),
        (
            {"namespaces": [A], "kinds": ["fact", "gossip"]},
            "invalid body: kinds.1: Input should be 'fact', 'summary' or 'checkpoint'",
        ),
        ({"namespaces": [A], "query": 7}, "invalid body: query: Input should be a valid string"),
    ],
)
async def test_rejects_bad_requests(api: ContractClient, body: Any, message: str) -> None:
    reply = await api.call("POST", "/v1/search", body)
    assert reply.status == 400
    assert reply.body["message"] == message


async def test_multi_namespace_merge_and_isolation(
    api: ContractClient, two: tuple[str, str]
) -> None:
    await api.commit(A, "alpha one")
    api.clock.advance(seconds=1)
    await api.commit(B, "beta one")
    api.clock.advance(seconds=1)
    await api.commit(A, "alpha two")
    assert contents(await api.search(A)) == ["alpha two", "alpha one"]
    assert contents(await api.search(B)) == ["beta one"]
    merged = await api.search(A, B, "org:does-not-exist")
    assert contents(merged) == ["alpha two", "beta one", "alpha one"]
    assert [m["namespace"] for m in merged.body["memories"]] == [A, B, A]
    assert contents(await api.search(A, B, limit=2)) == ["alpha two", "beta one"]
    assert contents(await api.search(A, A, A)) == ["alpha two", "alpha one"]
    assert contents(await api.search("org:does-not-exist")) == []


async def test_whole_memory_object(api: ContractClient, two: tuple[str, str]) -> None:
    memory_id = "11111111-2222-4333-8444-555555555555"
    await api.commit(
        B,
        "release train leaves every other tuesday",
        id=memory_id,
        kind="summary",
        source="runtime",
        pin=True,
        expires_at="2099-12-31T23:59:59.999999999-05:00",
        propagation={"scope": "team", "hops": [1, 2]},
    )
    reply = await api.search(B, query="when does the release train leave?")
    [memory] = reply.body["memories"]
    assert memory == {
        "id": memory_id,
        "namespace": B,
        "content": "release train leaves every other tuesday",
        "kind": "summary",
        "source": "runtime",
        "expires_at": "2100-01-01T04:59:59.999999Z",
        "propagation": {"scope": "team", "hops": [1, 2]},
        "pin": True,
        "created_at": memory["created_at"],
        "score": memory["score"],
    }
    # reranked (the default, with room): the fused score plus 4 x a mean MaxSim in [-1, 1]
    assert 0.5 < memory["score"] <= 5.0 + 1e-6


async def test_expired_memories_never_returned(api: ContractClient, two: tuple[str, str]) -> None:
    now = api.clock()
    await api.commit(A, "expired already", expires_at=(now - timedelta(seconds=1)).isoformat())
    await api.commit(A, "expires in a minute", expires_at=(now + timedelta(minutes=1)).isoformat())
    await api.commit(A, "never expires")
    assert sorted(contents(await api.search(A))) == ["expires in a minute", "never expires"]
    api.clock.advance(minutes=2)
    assert contents(await api.search(A)) == ["never expires"]
    assert contents(await api.search(A, query="expires")) == ["never expires"]


@pytest.mark.own_app  # awaits the service itself
async def test_janitor_sweep_deletes_expired(api: ContractClient, two: tuple[str, str]) -> None:
    now = api.clock()
    soon = (now + timedelta(minutes=1)).isoformat()
    await api.put_ns("org:temporary", "org", expires_at=soon)
    await api.commit("org:temporary", "in a temporary namespace")
    await api.commit(A, "short lived", expires_at=soon)
    await api.commit(A, "long lived")
    service = api.app[SERVICE]
    before = await service.sweep()
    assert (before.namespaces_deleted, before.memories_deleted) == (0, 0)
    api.clock.advance(minutes=2)
    report = await service.sweep()
    assert (report.namespaces_deleted, report.memories_deleted) == (1, 1)
    assert await service.backend.get_namespace("org:temporary") is None
    everything = MemoryFilter(now=now - timedelta(days=1))
    remaining = await service.backend.list_memories([A], everything, 10)
    assert [m.content for m in remaining] == ["long lived"]
