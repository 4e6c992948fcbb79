"""Two faults at once: lost namespace records together with a shard that
does not open, a garbled payload page, or a volume too full to open the shards.

Each test builds a real store, closes it, damages it on disk, and opens it again:
it must start, serve every namespace of the readable shards whole, answer 503
naming the others (never a 404 or an empty answer), say `degraded`, and rebuild
the rest once the shard is readable again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adapters.disk import free_bytes
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import StorageDamaged
from adapters.values import NamespaceRecord
from harness.clocks import WallClock
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings
from tests.support import faults
from tests.support.app import AppFactory
from tests.support.app import served
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything


async def test_lost_records_and_a_shard_that_does_not_open(seeded_store: Path) -> None:
    """Before: `cannot start` (the engine error while rebuilding), 0 namespaces served.

    The counts name every namespace, so those of the shard that does not open are
    brought back from them and answer 503 as that shard's namespaces always do."""
    faults.lose_records(seeded_store)
    manifest, text = faults.break_manifest(seeded_store, faults.BAD)
    down = faults.BAD_SHARD_NAMES
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        await faults.only_the_bad_shard_answers_503(store)
        assert set(store.condition().unreadable_namespaces) == down
        with pytest.raises(StorageDamaged, match=f"namespace {faults.BAD} is unreadable: its part"):
            await store.list_memories([faults.BAD], everything(), 50)
    manifest.write_text(text)
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        assert set((await faults.answers(store)).values()) == {"whole"}
        assert store.condition().unreadable_namespaces == ()


async def test_records_and_counts_lost_and_a_shard_that_does_not_open(seeded_store: Path) -> None:
    """Nothing names the namespaces of that shard: any name hashing to it answers 503
    (never 404, no record invented) until the shard opens, then is rebuilt."""
    faults.lose_records(seeded_store)
    faults.lose_counts(seeded_store)
    manifest, text = faults.break_manifest(seeded_store, faults.BAD)
    down = faults.BAD_SHARD_NAMES
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        await faults.only_the_bad_shard_answers_503(store)
        condition = store.condition()
        assert set(condition.unreadable_namespaces) == down  # the names asked for
        assert any(
            p.startswith(
                f"namespace records lost while memory shard(s) {faults.shard_of(faults.BAD):02d}"
            )
            for p in condition.problems
        )
        with pytest.raises(StorageDamaged, match=f"namespace {faults.BAD} is unknown for now"):
            await store.get_namespace(faults.BAD)
        with pytest.raises(StorageDamaged, match="is unknown for now"):
            await store.save_namespace(NamespaceRecord(faults.BAD, "workspace", T0))
        with pytest.raises(StorageDamaged, match="is unknown for now"):
            await store.delete_namespace(faults.BAD)  # not a 404: it may exist
    # Still unknown after another start; repaired, the next start rebuilds what it holds.
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        assert {n for n, a in (await faults.answers(store)).items() if a == "503"} == down
    manifest.write_text(text)
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        assert set((await faults.answers(store)).values()) == {"whole"}
        assert store.store.records.lost_shards == set()
        assert store.condition().unreadable_namespaces == ()


async def test_a_shard_moved_aside_is_forgotten(seeded_store: Path) -> None:
    """The repair for a shard that does not open: its namespaces become absent (404),
    ready for the import that restores them."""
    faults.lose_records(seeded_store)
    faults.lose_counts(seeded_store)
    faults.break_manifest(seeded_store, faults.BAD)
    store = QdrantEdgeBackend(DIM, seeded_store)
    await store.start()
    await store.close()
    shutil.move(faults.shard_dir(seeded_store, faults.BAD), seeded_store / "aside")
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        assert await store.get_namespace(faults.BAD) is None
        assert store.store.records.lost_shards == set()
        await store.save_namespace(NamespaceRecord(faults.BAD, "workspace", T0))


async def test_lost_records_and_a_garbled_payload_page(seeded_store: Path) -> None:
    """The main case: the shard opens, but some of its points cannot be read back.

    Records are rebuilt from the payload indexes; namespaces whose memories cannot be
    read answer 503 and health counts them from the start, before any read."""
    faults.lose_records(seeded_store)
    segment = next((faults.shard_dir(seeded_store, faults.BAD) / "segments").iterdir())
    faults.garble(segment / "payload_storage" / "page_0.dat")
    async with started(QdrantEdgeBackend(DIM, seeded_store)) as store:
        unreadable = set(store.condition().unreadable_namespaces)
        answers = await faults.answers(store)
        assert {n for n, a in answers.items() if a != "whole"} == unreadable
        assert unreadable, "the garbled page hid nothing: the test damages nothing"
        assert set(answers.values()) == {"whole", "503"}


async def test_lost_records_on_a_volume_too_full_to_open_the_shards(seeded_store: Path) -> None:
    """No shard opens (not enough room to map it) and nothing names the namespaces: every
    name answers 503 with the disk's message; once there is room, the next health check
    opens them and rebuilds."""
    faults.lose_records(seeded_store)
    faults.lose_counts(seeded_store)
    store = QdrantEdgeBackend(
        DIM, seeded_store, disk_headroom_bytes=free_bytes(seeded_store) + 2**40
    )
    await store.start()
    try:
        assert set((await faults.answers(store)).values()) == {"503"}
        with pytest.raises(StorageDamaged, match="data volume is full"):
            await store.get_namespace(faults.BAD)
        store.store.disk.headroom_bytes = 0  # room again
        await store.ping()
        assert set((await faults.answers(store)).values()) == {"whole"}
        assert store.store.records.lost_shards == set()
    finally:
        await store.close()


async def test_over_http_the_unknown_namespace_is_a_503_naming_itself(
    settings: Settings, encoder: SentenceTransformerEncoder, make_app: AppFactory, clock: WallClock
) -> None:
    await faults.seed(settings.data_dir, encoder.dimension)
    faults.lose_records(settings.data_dir)
    faults.lose_counts(settings.data_dir)
    faults.break_manifest(settings.data_dir, faults.BAD)
    async for api in served(make_app, clock):
        reply = await api.search(faults.BAD)
        assert reply.status == 503
        assert reply.body["message"].startswith(f"namespace {faults.BAD} is unknown for now")
        health = await api.call("GET", "/v1/health")
        assert (health.status, health.body["status"], health.body["unreadable_namespaces"]) == (
            200,
            "degraded",
            1,
        )
        good = next(n for n in faults.NAMES if faults.shard_of(n) != faults.shard_of(faults.BAD))
        assert (await api.search(good)).status == 200
