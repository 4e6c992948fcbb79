"""Each shard's write-ahead log (adapters/engine/shards.py, `open_shard`): segments of
`WAL_SEGMENT_BYTES`, so that after a flush the log holds little of what the segments already
have. Real embedded store and engine, real token vectors' size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from adapters.disk import allocated_bytes
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.engine import edge_config
from adapters.engine.shards import CONFIG_FILE
from adapters.engine.shards import WAL_OPTIONS
from adapters.engine.shards import WAL_SEGMENT_BYTES
from adapters.engine.shards import open_shard
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.support.records import T0
from tests.support.records import memory

DIMENSION = 384  # the model's: a memory's token vectors take about 40 KB of log
NAME = "ws:log"


def unit_rows(rng: np.random.Generator, count: int) -> list[list[float]]:
    rows = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    unit: list[list[float]] = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()
    return unit


def log_segments(shard_dir: Path) -> dict[str, int]:
    segments = [p for p in (shard_dir / "wal").iterdir() if p.name.startswith(("open-", "closed-"))]
    return {p.name: p.stat().st_size for p in segments}


async def test_after_a_flush_the_log_holds_at_most_two_segments(tmp_path: Path) -> None:
    """Written past several segments, then closed (every shard flushed): what the log
    keeps is its open segment and one closed, a few MiB, where the engine's default
    segment alone would keep all of it (about 16 MiB)."""
    store = QdrantEdgeBackend(DIMENSION, tmp_path, durability="async")
    await store.start()
    rng = np.random.default_rng(7)
    try:
        await store.save_namespace(NamespaceRecord(name=NAME, kind="workspace", created_at=T0))
        for n in range(400):
            vectors = MemoryVectors(unit_rows(rng, 1)[0], tokens=unit_rows(rng, 25))
            await store.upsert_memory(memory(NAME, id=f"m{n}", content=f"memory {n}"), vectors)
        shard_dir = store.store.shards.paths[store.store.shards.index_of(NAME)]
        written = allocated_bytes(shard_dir / "wal")
    finally:
        await store.close()
    assert written > 3 * WAL_SEGMENT_BYTES  # several segments were filled
    assert allocated_bytes(shard_dir / "wal") <= 2 * WAL_SEGMENT_BYTES + 64 * 1024
    assert set(log_segments(shard_dir).values()) == {WAL_SEGMENT_BYTES}


def test_a_new_shard_logs_in_segments_of_the_set_size(tmp_path: Path) -> None:
    shard = open_shard(tmp_path / "00", DIMENSION)
    shard.close()
    config = json.loads((tmp_path / "00" / CONFIG_FILE).read_text())
    assert config["wal_options"] == WAL_OPTIONS
    assert set(log_segments(tmp_path / "00").values()) == {WAL_SEGMENT_BYTES}
    assert not list(tmp_path.glob("*.new"))  # the scratch shard it was made from is gone


def test_a_shard_made_with_the_engines_default_log_gains_the_segment_size(
    tmp_path: Path,
) -> None:
    """A shard of a store created before: its file gains the options before it loads,
    and what it holds is kept."""
    path = tmp_path / "00"
    made = qe.EdgeShard.create(str(path), edge_config(DIMENSION))
    made.update(qe.UpdateOperation.upsert_points([qe.Point(1, [1.0] + [0.0] * 383)]))
    made.close()
    assert "wal_options" not in json.loads((path / CONFIG_FILE).read_text())
    shard = open_shard(path, DIMENSION)
    try:
        assert shard.info().points_count == 1
    finally:
        shard.close()
    assert json.loads((path / CONFIG_FILE).read_text())["wal_options"] == WAL_OPTIONS
