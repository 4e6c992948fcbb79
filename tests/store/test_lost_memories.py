"""Memories lost from the engine's files (issue 28, part 3): never a partial answer,
and the way back (restore, then `verify-store --accept`).

The id tracker cut in half hides memories from the engine: their payloads and
vectors stay in the segment's files, but qdrant-edge reaches a point only
through its external id, which the lost mappings held, so no API call can
bring them back (docs/repair.md says what to do instead).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from adapters.base import NamespaceRecord
from adapters.errors import StorageDamaged
from adapters.qdrant.edge.backend import QdrantEdgeBackend
from adapters.qdrant.edge.shards import SHARD_COUNT, shard_index
from plugin import cli
from tests.support.records import DIM, T0, everything, memory, unit

NAME = "org:tracked"


async def test_a_cut_id_tracker_refuses_reads_until_restored_and_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 3 of 5 listed as if whole (health `degraded`, but the answer looked complete)."""
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    written = [memory(NAME, content=f"memory {i}") for i in range(5)]
    await store.save_namespace(NamespaceRecord(NAME, "org", T0))
    for i, item in enumerate(written):
        await store.upsert_memory(item, unit(1, i))
    await store.close()
    shard = tmp_path / "store" / "shards" / f"{shard_index(NAME, SHARD_COUNT):02d}"
    tracker = next((shard / "segments").iterdir()) / "mutable_id_tracker.mappings"
    os.truncate(tracker, tracker.stat().st_size // 2)

    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        with pytest.raises(StorageDamaged, match=f"namespace {NAME} holds fewer memories"):
            await store.list_memories([NAME], everything(), 50)
        # Restore what was written (as `import` of the last export does): writes go on.
        batch = [(item, unit(1, i)) for i, item in enumerate(written)]
        await store.upsert_memories(batch)
        assert store.condition().problems  # still short of its count until accepted
    finally:
        await store.close()

    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path))
    assert await asyncio.to_thread(cli.main, ["verify-store", "--accept"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "verify-store: accepted 1 namespace(s) as they are now",
        "verify-store: ok: every namespace record agrees with the memories stored",
    ]
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        listed = await store.list_memories([NAME], everything(), 50)
        assert {m.id for m in listed} == {m.id for m in written}
        assert store.condition().problems == ()
    finally:
        await store.close()


async def test_accept_needs_the_stopped_store(capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9"
    assert await asyncio.to_thread(cli.main, ["verify-store", "--url", url, "--accept"]) == 2
    assert "stopped store only" in capsys.readouterr().out
