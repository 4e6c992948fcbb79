"""The write order's fill (plugin/upgrades/place_upgrade.py) on a store written without it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from plugin.upgrades import place_upgrade
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


async def test_memories_without_a_place_take_places_below_the_lowest_by_created_at(
    tmp_path: Path,
) -> None:
    async with started(QdrantEdgeBackend(DIM, tmp_path)) as store:
        for name in ("team:old", "team:mixed"):
            await store.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
        old = [
            memory("team:old", content=f"old {n}", created_at=T0 + timedelta(minutes=n))
            for n in (2, 0, 1)
        ]
        mixed = [
            memory("team:mixed", content="older", created_at=T0),
            memory("team:mixed", content="newer", created_at=T0 + timedelta(hours=1), pin=True),
            memory("team:mixed", content="placed", created_at=T0, position=0),
            memory("team:mixed", content="placed after", created_at=T0, position=1),
        ]
        for written in [*old, *mixed]:
            await store.upsert_memory(written, MemoryVectors(unit(1)))

        assert await place_upgrade.place_store(store, lambda: T0) == 5
        assert await places(store, "team:old") == {"old 2": -1, "old 1": -2, "old 0": -3}
        assert await places(store, "team:mixed") == {
            "newer": -1,
            "older": -2,
            "placed": 0,
            "placed after": 1,
        }
        assert (await store.store_meta.read_store_meta())["write_order"] == "complete"
        await store.upsert_memory(memory("team:old", content="unplaced"), MemoryVectors(unit(1)))
        assert await place_upgrade.place_store(store, lambda: T0) == 0  # recorded as done


async def places(store: QdrantEdgeBackend, namespace: str) -> dict[str, int | None]:
    found = await store.list_memories([namespace], everything(), 100)
    return {m.content: m.position for m in found}
