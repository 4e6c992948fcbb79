"""Damaged stores (scenario cases 2 and 3): serve what can be read, 503 for the rest, never 500.

Each test builds a real embedded store, closes it, damages it on disk the way a
bad disk or a careless hand would, and opens it again under the real app.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC
from datetime import datetime
from pathlib import Path

import pytest
import qdrant_edge as qe
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.clocks import WallClock
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import contract_health
from tests.support.app import served

GOOD, BAD = "workspace:good", "workspace:bad"
CAPABILITIES = ["embedding", "ttl", "pin"]
# Health while one namespace is unreadable.
ONE_UNREADABLE = {
    "status": "degraded",
    "version": "1.0.0",
    "capabilities": CAPABILITIES,
    "message": "1 namespace(s) unreadable and left out of searches (named in the "
    "log; docs/repair.md#unreadable-namespace)",
    "unreadable_namespaces": 1,
}


@pytest.fixture
async def seeded(make_app: AppFactory, clock: WallClock, settings: Settings) -> AsyncIterator[Path]:
    """A data dir with BAD's 3 memories written first, then GOOD's 20."""
    app = make_app()
    async with TestClient(TestServer(app)) as client:
        api = ContractClient(client, app, clock)
        for name, count in ((BAD, 3), (GOOD, 20)):
            await api.put_ns(name)
            for i in range(count):
                assert (await api.commit(name, f"memory {i} of {name}")).status == 201
    return settings.data_dir


def _smash(path: Path) -> None:
    with open(path, "r+b") as page:
        page.write(b"\xde\xad\xbe\xef" * 64)


def _damage_record(data_dir: Path) -> None:
    db = sqlite3.connect(data_dir / "store" / "namespaces.sqlite3")
    with db:
        db.execute("UPDATE namespaces SET record = '{broken' WHERE name = ?", (BAD,))
    db.close()


async def test_damaged_record_skips_one_namespace_and_serves_the_rest(
    seeded: Path, make_app: AppFactory, clock: WallClock, caplog: pytest.LogCaptureFixture
) -> None:
    _damage_record(seeded)
    async for api in served(make_app, clock):
        health = await api.call("GET", "/v1/health")
        assert (health.status, contract_health(health.body)) == (200, ONE_UNREADABLE)
        found = await api.search(GOOD, BAD, limit=100)
        assert found.status == 200
        assert {m["namespace"] for m in found.body["memories"]} == {GOOD}
        assert len(found.body["memories"]) == 20
        unreadable = {
            "code": "unavailable",
            "message": f"namespace {BAD} is unreadable in the embedded store; an operator can "
            "repair or drop it (docs/repair.md#unreadable-namespace)",
        }
        for reply in (await api.commit(BAD, "x"), await api.put_ns(BAD)):
            assert (reply.status, reply.body) == (503, unreadable)
        metrics = await _metrics(api)
        assert "memory_plugin_unreadable_namespaces 1.0" in metrics
        # The operator drops it; the platform re-creates it empty on its next PUT.
        assert (await api.call("DELETE", f"/v1/namespaces/{BAD}")).status == 204
        assert (await api.put_ns(BAD)).status == 200
        assert (await api.search(BAD)).body == {"memories": []}
        assert (await api.call("GET", "/v1/health")).body["status"] == "ok"
        assert "memory_plugin_unreadable_namespaces 0.0" in await _metrics(api)
    named = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(BAD in line and "skipped" in line for line in named), named


def _segment_of(data_dir: Path, name: str) -> Path:
    """The segment of the shard holding `name` (GOOD and BAD are in different shards)."""
    assert shard_index(GOOD, SHARD_COUNT) != shard_index(BAD, SHARD_COUNT)
    shard = data_dir / "store" / "shards" / f"{shard_index(name, SHARD_COUNT):02d}"
    return next((shard / "segments").iterdir())


async def test_damaged_payload_pages_answer_503_never_500(
    seeded: Path, make_app: AppFactory, clock: WallClock
) -> None:
    _smash(_segment_of(seeded, BAD) / "payload_storage" / "page_0.dat")
    async for api in served(make_app, clock):
        unreadable = {
            "code": "unavailable",
            "message": f"stored data unreadable (damaged files; see the plugin log): {BAD}",
        }
        for reply in (await api.search(BAD, query="memory"), await api.search(BAD)):
            assert (reply.status, reply.body) == (503, unreadable)
        both = await api.search(GOOD, BAD, query="memory")
        assert both.status == 200
        assert [m["namespace"] for m in both.body["memories"]] == [GOOD] * 20
        health = await api.call("GET", "/v1/health")
        assert (health.status, health.body["status"], health.body["unreadable_namespaces"]) == (
            200,
            "degraded",
            1,
        )


async def test_damaged_segment_manifest_takes_down_one_shard_only(
    seeded: Path, make_app: AppFactory, clock: WallClock
) -> None:
    """Before shards, the whole store stayed down (health 503, every namespace 503)."""
    (_segment_of(seeded, BAD) / "segment.json").write_text("{damaged")
    async for api in served(make_app, clock):
        health = await api.call("GET", "/v1/health")
        assert (health.status, contract_health(health.body)) == (200, ONE_UNREADABLE)
        assert len((await api.search(GOOD, query="memory", limit=50)).body["memories"]) == 20
        assert (await api.commit(GOOD, "x")).status == 201
        down = {
            "code": "unavailable",
            "message": f"stored data unreadable (damaged files; see the plugin log): {BAD}",
        }
        reply = await api.search(BAD, query="memory")
        assert (reply.status, reply.body) == (503, down)
        written = await api.commit(BAD, "x")
        assert written.status == 503
        assert written.body["message"].startswith(f"namespace {BAD} is unreadable: its part")


async def _metrics(api: ContractClient) -> str:
    async with api.client.get("/metrics") as response:
        return await response.text()


async def test_unparseable_payload_is_skipped_not_500(
    tmp_path: Path, encoder: SentenceTransformerEncoder
) -> None:
    """A point whose payload lacks fields (a bad hand edit) is left out of reads."""
    backend = QdrantEdgeBackend(
        encoder.dimension, tmp_path, token_dimension=encoder.token_dimension
    )
    await backend.start()
    try:
        now = datetime.now(UTC)
        await backend.save_namespace(NamespaceRecord(GOOD, "workspace", now))
        vector = encoder.encode(["a fact"])[0]
        memory = MemoryRecord(
            "7f3e2a10-0000-4000-8000-000000000001", GOOD, "a", "fact", "agent", now
        )
        await backend.upsert_memory(memory, MemoryVectors(vector))
        epoch = backend.store.records.live[GOOD].epoch
        other = replace(memory, id="7f3e2a10-0000-4000-8000-000000000002")
        payload = memory_to_payload(other, epoch)
        del payload["content"]  # matches every filter, cannot be read back
        broken = qe.Point(point_id(GOOD, other.id), vector, payload)
        backend.store.shards.of(GOOD).update(qe.UpdateOperation.upsert_points([broken]))
        listed = await backend.list_memories([GOOD], MemoryFilter(now=now), 10)
        assert [m.id for m in listed] == [memory.id]
    finally:
        await backend.close()
