"""PUT / PATCH / DELETE /v1/namespaces/{name}: status and whole body, against the spec."""

from __future__ import annotations

from datetime import UTC
from datetime import datetime
from datetime import timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import NamespaceRecord
from harness.clocks import WallClock
from tests.support.app import AppFactory
from tests.support.app import ContractClient

pytestmark = [pytest.mark.every_backend, pytest.mark.shares_server]

NS = "workspace:550e8400-e29b-41d4-a716-446655440000"


def recent(text: str, clock: WallClock) -> bool:
    moment = datetime.fromisoformat(text)
    return text.endswith("Z") and abs(moment - clock()) < timedelta(seconds=30)


def bad_request(message: str, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": "bad_request", "message": message}
    if errors is not None:
        body["details"] = {"errors": errors}
    return body


async def test_put_creates_then_replaces_keeping_created_at(api: ContractClient) -> None:
    first = await api.put_ns(NS)
    assert first.status == 200
    created_at = first.body["created_at"]
    assert recent(created_at, api.clock)
    assert first.body == {
        "name": NS,
        "kind": "workspace",
        "expires_at": None,
        "metadata": None,
        "created_at": created_at,
    }

    second = await api.put_ns(
        NS,
        "team",
        expires_at="2030-01-02T03:04:05.123456789+02:00",
        metadata={"owner": "ops", "tags": ["a", 1, None]},
    )
    assert second.status == 200
    assert second.body == {
        "name": NS,
        "kind": "team",
        "expires_at": "2030-01-02T01:04:05.123456Z",
        "metadata": {"owner": "ops", "tags": ["a", 1, None]},
        "created_at": created_at,
    }

    third = await api.put_ns(NS)
    assert third.body == first.body


class CountingEdge(QdrantEdgeBackend):
    """The real embedded backend, counting namespace writes."""

    saves = 0

    async def save_namespace(self, record: NamespaceRecord) -> None:
        CountingEdge.saves += 1
        await super().save_namespace(record)


async def test_put_unchanged_writes_nothing(make_app: AppFactory, tmp_path: Any) -> None:
    CountingEdge.saves = 0
    app = make_app(backend=CountingEdge(384, tmp_path / "counted"))
    async with TestClient(TestServer(app)) as client:
        for _ in range(5):
            async with client.put(f"/v1/namespaces/{NS}", json={"kind": "org"}) as response:
                assert response.status == 200
        async with client.put(f"/v1/namespaces/{NS}", json={"kind": "team"}) as response:
            assert response.status == 200
    assert CountingEdge.saves == 2


@pytest.mark.parametrize(
    "name",
    [
        "workspace",
        "Workspace:abc",
        ":abc",
        "workspace:",
        "workspace:a b",
        "work-space:abc",
        "workspace:abc%0A",
        "workspace:" + "a" * 247,
        "workspace:ä",
    ],
)
async def test_put_rejects_bad_names(api: ContractClient, name: str) -> None:
    reply = await api.put_ns(name)
    assert reply.status == 400
    assert reply.body["code"] == "bad_request"
    assert reply.body["message"].startswith("invalid namespace name: ")


async def test_slash_in_name_is_another_route(api: ContractClient) -> None:
    reply = await api.put_ns("workspace:a/b")
    assert (reply.status, reply.body) == (404, {"code": "not_found", "message": "no such route"})


async def test_longest_name_is_accepted(api: ContractClient) -> None:
    name = "workspace:" + "a" * 246
    assert len(name) == 256
    reply = await api.put_ns(name, "custom")
    assert (reply.status, reply.body["name"]) == (200, name)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "invalid body: kind: Field required"),
        (
            {"kind": "planet"},
            "invalid body: kind: Input should be 'workspace', 'team', 'org' or 'custom'",
        ),
        (
            {"kind": "org", "expires_at": "2030-01-02T03:04:05"},
            "invalid body: expires_at: Value error, must be an RFC 3339 date-time with an offset, "
            "e.g. 2026-01-02T03:04:05Z",
        ),
        (
            {"kind": "org", "expires_at": 1893456000},
            "invalid body: expires_at: Input should be a valid datetime",
        ),
        (
            {"kind": "org", "metadata": ["not", "an", "object"]},
            "invalid body: metadata: Input should be an object",
        ),
        ({"kind": 3}, "invalid body: kind: Input should be 'workspace', 'team', 'org' or 'custom'"),
    ],
)
async def test_put_rejects_bad_bodies(api: ContractClient, body: Any, message: str) -> None:
    reply = await api.call("PUT", f"/v1/namespaces/{NS}", body)
    assert reply.status == 400
    assert reply.body["code"] == "bad_request"
    assert reply.body["message"] == message
    assert reply.body["details"]["errors"][0]["problem"] in message


async def test_put_rejects_non_json(api: ContractClient) -> None:
    for raw in [b"", b"{kind: org}", b"[]", b"null"]:
        reply = await api.call("PUT", f"/v1/namespaces/{NS}", raw=raw)
        assert reply.status == 400, raw
        assert reply.body["code"] == "bad_request"


async def test_patch_updates_only_what_it_carries(api: ContractClient) -> None:
    created = (await api.put_ns(NS, "org", metadata={"a": 1})).body
    reply = await api.call("PATCH", f"/v1/namespaces/{NS}", {"expires_at": "2031-05-06T07:08:09Z"})
    assert reply.status == 200
    assert reply.body == created | {"expires_at": "2031-05-06T07:08:09.000000Z"}

    reply = await api.call("PATCH", f"/v1/namespaces/{NS}", {"metadata": {"b": 2}})
    assert reply.body == created | {
        "expires_at": "2031-05-06T07:08:09.000000Z",
        "metadata": {"b": 2},
    }

    reply = await api.call("PATCH", f"/v1/namespaces/{NS}", {"expires_at": None, "metadata": None})
    assert reply.body == created | {"metadata": None}


async def test_patch_without_fields_is_bad_request(api: ContractClient) -> None:
    await api.put_ns(NS)
    reply = await api.call("PATCH", f"/v1/namespaces/{NS}", {"unknown": 1})
    assert (reply.status, reply.body) == (
        400,
        bad_request("PATCH needs at least one of expires_at, metadata"),
    )


async def test_patch_unknown_namespace_is_not_found(api: ContractClient) -> None:
    reply = await api.call("PATCH", "/v1/namespaces/org:nobody", {"metadata": {}})
    assert (reply.status, reply.body) == (
        404,
        {"code": "not_found", "message": "namespace org:nobody not found"},
    )


async def test_delete_removes_namespace_and_memories(api: ContractClient) -> None:
    await api.put_ns(NS)
    await api.commit(NS, "something to forget with the namespace")
    reply = await api.call("DELETE", f"/v1/namespaces/{NS}")
    assert (reply.status, reply.body) == (204, None)
    assert (await api.search(NS)).body == {"memories": []}
    again = await api.call("DELETE", f"/v1/namespaces/{NS}")
    assert (again.status, again.body) == (
        404,
        {"code": "not_found", "message": f"namespace {NS} not found"},
    )
    await api.put_ns(NS)
    assert (await api.search(NS)).body == {"memories": []}


async def test_expired_namespace_is_gone_and_put_starts_afresh(api: ContractClient) -> None:
    expires = (api.clock() + timedelta(hours=1)).astimezone(UTC).isoformat()
    first = (await api.put_ns(NS, expires_at=expires)).body
    assert (await api.commit(NS, "lives as long as its namespace")).status == 201
    api.clock.advance(hours=2)

    assert (await api.search(NS)).body == {"memories": []}
    commit = await api.commit(NS, "too late")
    assert (commit.status, commit.body) == (
        404,
        {"code": "not_found", "message": f"namespace {NS} not found"},
    )
    patch = await api.call("PATCH", f"/v1/namespaces/{NS}", {"expires_at": None})
    assert patch.status == 404

    revived = await api.put_ns(NS)
    assert revived.status == 200
    assert revived.body["created_at"] != first["created_at"]
    assert (await api.search(NS)).body == {"memories": []}
