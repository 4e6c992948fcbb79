"""Hostile input and races over HTTP: never a crash, never a 5xx for a caller's mistake.

Each test holds one numbered case; `scenarios/__main__.py` drives the
same cases against a server process and prints before/after figures. Damaged
stores and a full disk have modules of their own (test_damage.py,
test_disk_full.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections import Counter
from collections.abc import Sequence
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from plugin.embedding.embedder import MAX_EMBEDDED_CHARS
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.keys import EMBEDDER
from plugin.http.keys import SETTINGS
from tests.support.app import AppFactory
from tests.support.app import ContractClient

pytestmark = [pytest.mark.every_backend, pytest.mark.shares_server]

FINITE = "numbers must be finite: 1e400 overflows a double, NaN is not JSON"


def _refused(field: str) -> dict[str, Any]:
    problem = f"Value error, {FINITE}"
    return {
        "code": "bad_request",
        "message": f"invalid body: {field}: {problem}",
        "details": {"errors": [{"field": field, "problem": problem}]},
    }


def _memory_json(propagation: str) -> str:
    return '{"content":"x","kind":"fact","source":"agent","propagation":' + propagation + "}"


# -- 4: numbers out of range ------------------------------------------------------------


@pytest.mark.parametrize(
    "propagation", ['{"a":1e400}', '{"a":[1,{"b":-1e400}]}', '{"a":NaN}', '{"a":Infinity}']
)
async def test_non_finite_propagation_is_400_and_stores_nothing(
    api: ContractClient, propagation: str
) -> None:
    await api.put_ns("workspace:n")
    reply = await api.call(
        "POST", "/v1/namespaces/workspace:n/memories", raw=_memory_json(propagation)
    )
    assert (reply.status, reply.body) == (400, _refused("propagation"))
    listed = await api.search("workspace:n")
    assert (listed.status, listed.body) == (200, {"memories": []})


async def test_non_finite_metadata_is_400_and_creates_nothing(api: ContractClient) -> None:
    reply = await api.call(
        "PUT", "/v1/namespaces/workspace:m", raw='{"kind":"workspace","metadata":{"a":1e400}}'
    )
    assert (reply.status, reply.body) == (400, _refused("metadata"))
    commit = await api.commit("workspace:m", "x")
    assert commit.status == 404


async def test_big_integers_in_propagation_come_back_as_sent(api: ContractClient) -> None:
    sent = {"big": 2**70, "negative": -(2**65), "nested": [2**64, {"x": 10**30}], "f": 1.5}
    await api.put_ns("workspace:big", metadata={"limit": 2**80})
    memory_id = "7f3e2a10-0000-4000-8000-000000000001"
    reply = await api.commit("workspace:big", "a fact", id=memory_id, propagation=sent)
    assert reply.status == 201
    listed = await api.search("workspace:big")
    assert [m["propagation"] for m in listed.body["memories"]] == [sent]
    again = await api.put_ns("workspace:big", metadata={"limit": 2**80})
    assert again.body["metadata"] == {"limit": 2**80}


# -- 5: extreme valid times -------------------------------------------------------------


async def test_latest_valid_time_is_clamped_not_500(api: ContractClient) -> None:
    latest = "9999-12-31T23:59:59-23:59"  # past year 9999 in UTC
    reply = await api.put_ns("workspace:t", expires_at=latest)
    assert (reply.status, reply.body["expires_at"]) == (200, "9999-12-31T23:59:59.999999Z")
    commit = await api.commit("workspace:t", "lasts", expires_at=latest)
    assert commit.status == 201
    listed = await api.search("workspace:t")
    assert [m["expires_at"] for m in listed.body["memories"]] == ["9999-12-31T23:59:59.999999Z"]


async def test_earliest_valid_time_is_clamped_and_already_expired(api: ContractClient) -> None:
    earliest = "0001-01-01T00:00:00+14:00"  # before year 1 in UTC
    await api.put_ns("workspace:e")
    commit = await api.commit("workspace:e", "gone at once", expires_at=earliest)
    assert commit.status == 201
    listed = await api.search("workspace:e")
    assert (listed.status, listed.body) == (200, {"memories": []})
    reply = await api.put_ns("workspace:e2", expires_at=earliest)
    assert (reply.status, reply.body["expires_at"]) == (200, "0001-01-01T00:00:00.000000Z")
    assert (await api.commit("workspace:e2", "x")).status == 404


# -- 6: large content -------------------------------------------------------------------


class _Recording:
    """The app's model, noting how long each text it was handed was."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lengths: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str], **kwargs: Any) -> Any:
        self.lengths.extend(len(text) for text in texts)
        return self.inner.embed(texts, **kwargs)

    def embed_lone(self, texts: Sequence[str], **kwargs: Any) -> Any:
        self.lengths.extend(len(text) for text in texts)
        return self.inner.embed_lone(texts, **kwargs)


@pytest.mark.own_app  # it records at the app's model
async def test_large_content_is_cut_before_the_model_and_stored_whole(
    api: ContractClient, backend_kind: str
) -> None:
    # Pinecone refuses metadata over 40 KB (a 400 of its own, tested elsewhere).
    size = 900 * 1024 if backend_kind == "embedded" else 30_000
    big = ("all work and no play makes the agent a dull agent. " * 18_000)[:size]
    embedder = api.app[EMBEDDER]
    recording = _Recording(embedder.encoder)
    embedder.encoder = recording
    await api.put_ns("workspace:big")
    reply = await api.commit("workspace:big", big)
    assert reply.status == 201
    assert recording.lengths == [MAX_EMBEDDED_CHARS]
    found = await api.search("workspace:big", query="a dull agent")
    assert [len(m["content"]) for m in found.body["memories"]] == [len(big)]


def test_cutting_the_text_does_not_change_its_vector(encoder: SentenceTransformerEncoder) -> None:
    """The model reads 256 tokens: the first MAX_EMBEDDED_CHARS characters hold more."""
    words = "the quick brown fox jumps over the lazy dog while memories pile up "
    text = (words * 2000)[:100_000]
    whole, cut = encoder.encode([text, text[:MAX_EMBEDDED_CHARS]])
    assert sum(a * b for a, b in zip(whole, cut, strict=True)) > 0.99999


# -- 7 and 8: namespace races -----------------------------------------------------------


async def test_put_racing_delete_is_never_5xx(api: ContractClient) -> None:
    async def one(i: int) -> tuple[int, Any]:
        if i % 2:
            reply = await api.put_ns("workspace:race")
        else:
            reply = await api.call("DELETE", "/v1/namespaces/workspace:race")
        return reply.status, reply.body

    results = await asyncio.gather(*[one(i) for i in range(150)])
    assert set(Counter(status for status, _ in results)) <= {200, 204, 404}
    for status, body in results:
        if status >= 400:
            assert str(api.app[SETTINGS].data_dir) not in json.dumps(body)


async def test_concurrent_first_puts_answer_one_created_at(api: ContractClient) -> None:
    replies = await asyncio.gather(*[api.put_ns("workspace:first") for _ in range(50)])
    assert {r.status for r in replies} == {200}
    created = {r.body["created_at"] for r in replies}
    assert len(created) == 1
    later = await api.put_ns("workspace:first")
    assert {later.body["created_at"]} == created


# -- 9: client hang-up ------------------------------------------------------------------


async def test_client_hang_up_mid_body_is_not_a_500(
    make_app: AppFactory, backend_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Served as `serve` serves (AppRunner, no handler cancellation: TestServer differs)."""
    if backend_kind != "embedded":
        pytest.skip("the HTTP layer's behaviour; one backend shows it")
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{base}/v1/namespaces/workspace:h", json={"kind": "team"}):
                pass
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", port)) as raw:
                    raw.sendall(
                        b"POST /v1/namespaces/workspace:h/memories HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
                    )
                    await asyncio.sleep(0.05)
            counted = 'route="/v1/namespaces/{name}/memories",status="499"} 3.0'
            for _ in range(250):  # the server notices the hang-ups asynchronously
                async with session.get(f"{base}/metrics") as response:
                    text = await response.text()
                if counted in text:
                    break
                await asyncio.sleep(0.02)
    finally:
        await runner.cleanup()
    assert counted in text
    assert 'status="500"' not in text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert all(r.exc_info is None for r in caplog.records)


# -- 11: a burst into one namespace -----------------------------------------------------


async def test_burst_of_same_id_commits_all_succeed_as_one_memory(api: ContractClient) -> None:
    await api.put_ns("workspace:burst")
    memory_id = "7f3e2a10-0000-4000-8000-00000000b0b0"
    replies = await asyncio.gather(
        *[api.commit("workspace:burst", f"version {i}", id=memory_id) for i in range(50)]
    )
    assert Counter(r.status for r in replies) == {201: 50}
    listed = await api.search("workspace:burst")
    assert [m["id"] for m in listed.body["memories"]] == [memory_id]
