"""What the tests of two faults at once share (test_combined_faults.py,
test_lost_memories.py): a seeded store and the damage done to it on disk."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import StorageDamaged
from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

NAMES = [f"workspace:n{i:02d}" for i in range(24)]
MEMORIES = 4
BAD = NAMES[0]


def shard_of(name: str) -> int:
    return shard_index(name, SHARD_COUNT)


# The namespaces that share BAD's shard: those a broken shard takes down with it.
BAD_SHARD_NAMES = frozenset(name for name in NAMES if shard_of(name) == shard_of(BAD))


def shard_dir(data_dir: Path, name: str) -> Path:
    return data_dir / "store" / "shards" / f"{shard_of(name):02d}"


async def seed(data_dir: Path, dimension: int = DIM) -> None:
    store = QdrantEdgeBackend(dimension, data_dir)
    await store.start()
    try:
        for name in NAMES:
            await store.save_namespace(NamespaceRecord(name, "workspace", T0))
            for i in range(MEMORIES):
                vector = unit(1, i) + [0.0] * (dimension - DIM)
                await store.upsert_memory(
                    memory(name, content=f"{name} {i}"), MemoryVectors(vector)
                )
    finally:
        await store.close()


def lose_records(data_dir: Path) -> None:
    records = data_dir / "store" / "namespaces.sqlite3"
    records.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        records.with_name(records.name + suffix).unlink(missing_ok=True)


def break_manifest(data_dir: Path, name: str) -> tuple[Path, str]:
    manifest = next((shard_dir(data_dir, name) / "segments").iterdir()) / "segment.json"
    text = manifest.read_text()
    manifest.write_text("{damaged")
    return manifest, text


def garble(path: Path) -> None:
    with open(path, "r+b") as page:
        page.write(os.urandom(4096))


async def answers(store: QdrantEdgeBackend) -> dict[str, str]:
    """Per namespace: `whole`, `503`, or what went wrong (the service names the
    namespace in a failed read's 503: tests/qdrant/edge/test_damage.py)."""
    found = {}
    for name in NAMES:
        try:
            record = await store.get_namespace(name)
            listed = [] if record is None else await store.list_memories([name], everything(), 50)
            found[name] = "whole" if len(listed) == MEMORIES else f"wrong: {len(listed)}"
        except StorageDamaged:
            found[name] = "503"
    return found


async def only_the_bad_shard_answers_503(store: QdrantEdgeBackend) -> None:
    """The broken shard's namespaces answer 503; every other one is whole."""
    found = await answers(store)
    assert {n for n, a in found.items() if a == "503"} == BAD_SHARD_NAMES
    assert {n for n, a in found.items() if a == "whole"} == set(NAMES) - BAD_SHARD_NAMES


def lose_counts(data_dir: Path) -> None:
    (data_dir / "store" / "counts.sqlite3").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (data_dir / "store" / f"counts.sqlite3{suffix}").unlink(missing_ok=True)
