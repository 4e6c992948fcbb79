"""POST /v1/namespaces/{name}/memories and DELETE /v1/memories/{id}."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from plugin.http.keys import EMBEDDER
from tests.support.app import ContractClient

pytestmark = [pytest.mark.every_backend, pytest.mark.shares_server]

NS = "workspace:abc"
OTHER = "team:xyz"


@pytest.fixture
async def ns(api: ContractClient) -> str:
    assert (await api.put_ns(NS)).status == 200
    return NS


async def listing(api: ContractClient, *names: str) -> list[dict[str, Any]]:
    reply = await api.search(*names, limit=100)
    assert reply.status == 200
    memories: list[dict[str, Any]] = reply.body["memories"]
    return memories


async def test_commit_generates_an_id(api: ContractClient, ns: str) -> None:
    reply = await api.commit(ns, "user prefers tabs over spaces")
    assert reply.status == 201
    new_id = reply.body["id"]
    assert uuid.UUID(new_id).version == 4
    assert reply.body == {"id": new_id, "namespace": ns}
    [stored] = await listing(api, ns)
    assert stored == {
        "id": new_id,
        "namespace": ns,
        "content": "user prefers tabs over spaces",
        "kind": "fact",
        "source": "agent",
        "expires_at": None,
        "propagation": None,
        "pin": False,
        "created_at": stored["created_at"],
        "score": None,
    }


async def test_same_id_twice_updates_in_place(api: ContractClient, ns: str) -> None:
    given = "A1B2C3D4-E5F6-4711-8899-AABBCCDDEEFF"
    canonical = given.lower()
    first = await api.commit(ns, "first version", id=given, kind="fact", source="agent")
    assert (first.status, first.body) == (201, {"id": canonical, "namespace": ns})
    [before] = await listing(api, ns)

    second = await api.commit(
        ns,
        "second version",
        id=canonical,
        kind="summary",
        source="user",
        pin=True,
        propagation={"to": ["org:acme"]},
        expires_at="2099-01-01T00:00:00Z",
    )
    assert (second.status, second.body) == (201, {"id": canonical, "namespace": ns})
    assert await listing(api, ns) == [
        {
            "id": canonical,
            "namespace": ns,
            "content": "second version",
            "kind": "summary",
            "source": "user",
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "propagation": {"to": ["org:acme"]},
            "pin": True,
            "created_at": before["created_at"],
            "score": None,
        }
    ]


async def test_commit_into_unknown_namespace(api: ContractClient) -> None:
    reply = await api.commit("workspace:never-upserted", "hello")
    assert (reply.status, reply.body) == (
        404,
        {"code": "not_found", "message": "namespace workspace:never-upserted not found"},
    )


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"content": "   \n\t"}, "content", "Value error, must not be blank"),
        ({"content": ""}, "content", "Value error, must not be blank"),
        ({"content": 42}, "content", "Input should be a valid string"),
        ({"kind": "opinion"}, "kind", "Input should be 'fact', 'summary' or 'checkpoint'"),
        ({"source": "robot"}, "source", "Input should be 'agent', 'runtime' or 'user'"),
        ({"pin": "true"}, "pin", "Input should be a valid boolean"),
        ({"pin": 1}, "pin", "Input should be a valid boolean"),
        (
            {"id": "not-a-uuid"},
            "id",
            "Value error, must be a UUID like 550e8400-e29b-41d4-a716-446655440000",
        ),
        ({"id": 7}, "id", "Input should be a valid string"),
        (
            {"expires_at": "2030-01-01"},
            "expires_at",
            "Value error, must be an RFC 3339 date-time with an offset, e.g. 2026-01-02T03:04:05Z",
        ),
        ({"propagation": "x"}, "propagation", "Input should be an object"),
        ({"embedding": ["a"]}, "embedding.0", "Input should be a valid number"),
    ],
)
async def test_commit_rejects_bad_fields(
    api: ContractClient, ns: str, fields: dict[str, Any], field: str, problem: str
) -> None:
    body = {"content": "valid", "kind": "fact", "source": "agent"} | fields
    reply = await api.call("POST", f"/v1/namespaces/{ns}/memories", body)
    assert reply.status == 400
    assert reply.body["code"] == "bad_request"
    assert reply.body["message"] == f"invalid body: {field}: {problem}"
    assert await listing(api, ns) == []


async def test_commit_missing_fields(api: ContractClient, ns: str) -> None:
    reply = await api.call("POST", f"/v1/namespaces/{ns}/memories", {"content": "x"})
    assert reply.status == 400
    assert [e["field"] for e in reply.body["details"]["errors"]] == ["kind", "source"]


async def test_supplied_embedding_is_ignored(api: ContractClient, ns: str) -> None:
    junk = [1.0, -2.0, 3.5]  # wrong length on purpose: accepted, never stored
    await api.commit(ns, "the staging database lives in eu-west-1", embedding=junk)
    await api.commit(ns, "lunch is at noon on fridays")
    reply = await api.search(ns, query="where is the staging database hosted?", embedding=[0.0] * 7)
    assert reply.body["memories"][0]["content"] == ("the staging database lives in eu-west-1")


@pytest.mark.settings(backend_timeout_s=10)
async def test_hundred_parallel_writes(api: ContractClient, ns: str) -> None:
    """All land, sharing model batches. One namespace's 100 texts take the model about a
    second on 2 cores, so the default 1.5 s deadline would make this a race on a slower
    machine (the deadline has tests of its own)."""
    ids = [str(uuid.uuid4()) for _ in range(100)]
    replies = await asyncio.gather(
        *(
            api.commit(ns, f"parallel memory number {i} about topic {i % 7}", id=memory_id)
            for i, memory_id in enumerate(ids)
        )
    )
    assert [r.status for r in replies] == [201] * 100
    assert [r.body for r in replies] == [{"id": i, "namespace": ns} for i in ids]
    stored = await listing(api, ns)
    assert sorted(m["id"] for m in stored) == sorted(ids)
    stats = api.app[EMBEDDER].stats
    assert stats.texts >= 100
    assert stats.largest > 1, "concurrent writes must share embedding batches"


async def test_forget(api: ContractClient, ns: str) -> None:
    memory_id = (await api.commit(ns, "forget me")).body["id"]
    keep_id = (await api.commit(ns, "keep me")).body["id"]
    reply = await api.call(
        "DELETE", f"/v1/memories/{memory_id.upper()}", {"requested_by_namespace": ns}
    )
    assert (reply.status, reply.body) == (204, None)
    assert [m["id"] for m in await listing(api, ns)] == [keep_id]
    again = await api.call("DELETE", f"/v1/memories/{memory_id}", {"requested_by_namespace": ns})
    assert (again.status, again.body) == (
        404,
        {"code": "not_found", "message": f"memory {memory_id} not found in {ns}"},
    )


async def test_forget_only_inside_requested_namespace(api: ContractClient, ns: str) -> None:
    await api.put_ns(OTHER, "team")
    memory_id = (await api.commit(ns, "belongs to the workspace")).body["id"]
    reply = await api.call("DELETE", f"/v1/memories/{memory_id}", {"requested_by_namespace": OTHER})
    assert (reply.status, reply.body) == (
        404,
        {"code": "not_found", "message": f"memory {memory_id} not found in {OTHER}"},
    )
    unknown = await api.call(
        "DELETE", f"/v1/memories/{memory_id}", {"requested_by_namespace": "org:unknown"}
    )
    assert unknown.status == 404
    assert [m["id"] for m in await listing(api, ns)] == [memory_id]


@pytest.mark.parametrize(
    ("path_id", "body", "message"),
    [
        (
            "nope",
            {"requested_by_namespace": NS},
            "invalid memory id: must be a UUID like 550e8400-e29b-41d4-a716-446655440000",
        ),
        (
            "0b6f3c52-6a0e-4c1e-9a54-2f1d6b8e7c01",
            {},
            "invalid body: requested_by_namespace: Field required",
        ),
        (
            "5d2e8a17-93b4-4f60-8c2a-71e9d0f4a6b2",
            {"requested_by_namespace": "no colon"},
            "invalid body: requested_by_namespace: Value error, namespace name must match "
            "^[a-z]+:[A-Za-z0-9_:.\\-]+$",
        ),
        (
            "9a41c7e3-0d58-4b2f-a6e1-3c8b5f7d2e93",
            {"requested_by_namespace": NS + "\n"},
            "invalid body: requested_by_namespace: Value error, namespace name must match "
            "^[a-z]+:[A-Za-z0-9_:.\\-]+$",
        ),
    ],
)
async def test_forget_rejects_bad_input(
    api: ContractClient, ns: str, path_id: str, body: Any, message: str
) -> None:
    reply = await api.call("DELETE", f"/v1/memories/{path_id}", body)
    assert reply.status == 400
    assert reply.body["message"] == message


async def test_expired_memory_cannot_be_forgotten_or_found(api: ContractClient, ns: str) -> None:
    soon = (api.clock() + timedelta(minutes=5)).isoformat()
    memory_id = (await api.commit(ns, "short lived", expires_at=soon)).body["id"]
    assert len(await listing(api, ns)) == 1
    api.clock.advance(minutes=6)
    assert await listing(api, ns) == []
    reply = await api.call("DELETE", f"/v1/memories/{memory_id}", {"requested_by_namespace": ns})
    assert reply.status == 404


async def test_rewrite_of_expired_id_starts_afresh(api: ContractClient, ns: str) -> None:
    memory_id = str(uuid.uuid4())
    soon = (api.clock() + timedelta(minutes=5)).isoformat()
    await api.commit(ns, "old life", id=memory_id, expires_at=soon)
    [old] = await listing(api, ns)
    api.clock.advance(minutes=6)
    await api.commit(ns, "new life", id=memory_id)
    [new] = await listing(api, ns)
    assert (new["content"], new["expires_at"]) == ("new life", None)
    assert new["created_at"] > old["created_at"]
