"""Each namespace's write order (plugin/core/write_order.py) as `MemoryService.commit` gives it.

Against the embedded store and a stand-in model: places in arrival order from 0 in a new
namespace, one read of the store after a restart, an upsert keeping its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from plugin.http.wire import MemoryWrite
from plugin.http.wire import NamespaceUpsert
from tests.support.encoders import GatedEncoder

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NS = "workspace:w"


class Plugin:
    """A service over an embedded store in `data_dir`, as one process of the plugin."""

    def __init__(self, data_dir: Path) -> None:
        self.backend = QdrantEdgeBackend(3, data_dir)
        encoder = GatedEncoder()
        encoder.gate.set()
        self.embedder = BatchingEmbedder(encoder)
        self.now = NOW
        self.service = MemoryService(
            self.backend, self.embedder, KeywordEncoder(), clock=lambda: self.now
        )

    async def commit(self, content: str, **fields: Any) -> MemoryRecord:
        body = {"content": content, "kind": "fact", "source": "agent", **fields}
        return await self.service.commit(NS, MemoryWrite.model_validate(body))

    async def places(self) -> dict[str, int | None]:
        found = await self.backend.list_memories([NS], MemoryFilter(now=self.now), 100)
        return {memory.content: memory.position for memory in found}


@pytest.fixture
async def plugin(tmp_path: Path) -> AsyncIterator[Plugin]:
    async with running(tmp_path) as started:
        yield started


class running:
    def __init__(self, data_dir: Path) -> None:
        self.plugin = Plugin(data_dir)

    async def __aenter__(self) -> Plugin:
        await self.plugin.backend.start()
        await self.plugin.embedder.start()
        return self.plugin

    async def __aexit__(self, *_: object) -> None:
        await self.plugin.embedder.close()
        await self.plugin.backend.close()


async def test_a_new_namespace_places_commits_from_0_in_arrival_order(plugin: Plugin) -> None:
    await plugin.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))
    first = await plugin.commit("first")
    together = await asyncio.gather(*(plugin.commit(f"together {n}") for n in range(5)))
    assert first.position == 0
    assert sorted(m.position for m in together) == [1, 2, 3, 4, 5]
    assert [m.position for m in together] == [1, 2, 3, 4, 5]  # taken as they arrive
    assert (await plugin.places())["first"] == 0


async def test_an_upsert_keeps_its_place_and_an_expired_id_takes_a_new_one(plugin: Plugin) -> None:
    await plugin.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))
    kept = "11111111-2222-4333-8444-555555555555"
    lapsed = "11111111-2222-4333-8444-666666666666"
    await plugin.commit("kept", id=kept)
    await plugin.commit("lapsing", id=lapsed, expires_at="2026-11-23T12:00:01Z")
    await plugin.commit("between")
    assert (await plugin.commit("kept, changed", id=kept)).position == 0
    plugin.now = NOW + timedelta(seconds=2)
    assert (await plugin.commit("lapsed, again", id=lapsed)).position == 3
    assert await plugin.places() == {"kept, changed": 0, "between": 2, "lapsed, again": 3}


async def test_after_a_restart_places_follow_the_newest_stored(tmp_path: Path) -> None:
    async with running(tmp_path) as before:
        await before.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))
        for n in range(3):
            await before.commit(f"before {n}", pin=n == 1)
    async with running(tmp_path) as after:
        await after.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))  # exists
        together = await asyncio.gather(*(after.commit(f"after {n}") for n in range(4)))
        assert [m.position for m in together] == [3, 4, 5, 6]


async def test_a_namespace_deleted_and_created_again_starts_at_0(plugin: Plugin) -> None:
    await plugin.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))
    await plugin.commit("old life")
    await plugin.service.delete_namespace(NS)
    await plugin.service.upsert_namespace(NS, NamespaceUpsert(kind="workspace"))
    assert (await plugin.commit("new life")).position == 0
