"""Memories lost from the engine's files: never a partial answer,
and the way back (restore, then `verify-store --accept`).

The id tracker cut in half hides memories from the engine: their payloads and
vectors stay in the segment's files, but qdrant-edge reaches a point only
through its external id, which the lost mappings held, so no API call can
bring them back (docs/repair.md says what to do instead).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import StorageDamaged
from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from plugin import cli
from tests.support import faults
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

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
        await store.upsert_memory(item, MemoryVectors(unit(1, i)))
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
        await store.transfer.upsert_memories(batch)
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


@pytest.mark.parametrize("engine_loss", ["none", "id tracker cut"])
async def test_lost_records_with_a_loss_in_the_engine(seeded_store: Path, engine_loss: str) -> None:
    """Before: the counts lived in the records' file and went with it, so a namespace
    rebuilt from what the engine still found listed part of its memories as if whole."""
    faults.lose_records(seeded_store)
    if engine_loss == "id tracker cut":
        _cut_tracker(seeded_store, faults.BAD)
    store = QdrantEdgeBackend(DIM, seeded_store)
    await store.start()
    try:
        answers = await faults.answers(store)
        short = {n for n, a in answers.items() if a != "whole"}
        if engine_loss == "none":
            assert short == set()
            assert store.condition().problems == ()
        else:
            assert short == {faults.BAD}, answers
            assert answers[faults.BAD] == "503"
            [problem] = store.condition().problems
            assert problem.startswith("1 namespace(s) hold fewer memories than recorded")
    finally:
        await store.close()


def _cut_tracker(data_dir: Path, name: str) -> None:
    trackers = (faults.shard_dir(data_dir, name) / "segments").glob("*/mutable_id_tracker.mappings")
    tracker = max(trackers, key=lambda path: path.stat().st_size)
    os.truncate(tracker, tracker.stat().st_size // 2)


async def test_records_and_counts_lost_stay_degraded_until_accepted(
    seeded_store: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both files lost: a loss in the engine at the same time (an id tracker cut, a WAL
    garbled) could not show, so health says so until an operator vouches for them."""
    faults.lose_records(seeded_store)
    faults.lose_counts(seeded_store)
    store = QdrantEdgeBackend(DIM, seeded_store)
    await store.start()
    try:
        [problem] = store.condition().problems
        assert problem.startswith(
            f"{len(faults.NAMES)} namespace record(s) rebuilt from their memories"
        )
        assert await store.list_memories([faults.BAD], everything(), 50)
    finally:
        await store.close()
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(seeded_store))
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 1
    capsys.readouterr()
    assert await asyncio.to_thread(cli.main, ["verify-store", "--accept"]) == 0
    out = capsys.readouterr().out
    assert f"accepted {len(faults.NAMES)} namespace(s) as they are now" in out
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 0


async def test_counts_of_a_store_from_before_move_to_their_own_file(seeded_store: Path) -> None:
    counts = seeded_store / "store" / "counts.sqlite3"
    counts.unlink()
    for suffix in ("-wal", "-shm"):
        counts.with_name(counts.name + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(seeded_store / "store" / "namespaces.sqlite3")
    with db:
        db.executemany(
            "INSERT INTO counts VALUES ((SELECT epoch FROM namespaces WHERE name = ?), ?)",
            [(name, faults.MEMORIES + (name == faults.BAD)) for name in faults.NAMES],
        )
    db.close()
    store = QdrantEdgeBackend(DIM, seeded_store)
    await store.start()
    try:
        [problem] = store.condition().problems  # faults.BAD's count from before says one more
        assert f"{faults.BAD} ({faults.MEMORIES} of {faults.MEMORIES + 1})" in problem
        assert counts.is_file()
    finally:
        await store.close()


async def test_a_namespace_lost_whole_with_its_record_answers_503(seeded_store: Path) -> None:
    """Every memory of a namespace gone from the engine and its record lost: known from
    its count alone (counts.sqlite3 names it), it answers 503, not 404 or an empty list."""
    faults.lose_records(seeded_store)
    shard = qe.EdgeShard.load(str(faults.shard_dir(seeded_store, faults.BAD)))
    is_bad = qe.Filter(must=[qe.FieldCondition("ns", match=qe.MatchValue(faults.BAD))])
    shard.update(qe.UpdateOperation.delete_points_by_filter(is_bad))
    shard.flush()
    shard.close()
    store = QdrantEdgeBackend(DIM, seeded_store)
    await store.start()
    try:
        answers = await faults.answers(store)
        assert answers[faults.BAD] == "503"
        assert set(answers.values()) == {"whole", "503"}
        problems = store.condition().problems
        assert any(f"{faults.BAD} (0 of {faults.MEMORIES})" in p for p in problems)
    finally:
        await store.close()


@pytest.mark.long
async def test_a_write_ahead_log_torn_under_acknowledged_writes_is_loud(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a power cut leaves when the disk lost part of a log the plugin had synced
    (a disk that lies about `fsync`, a damaged sector): the store starts, and the
    namespace answers 503 and is named by health and verify-store, never listed short."""
    live, image = tmp_path / "live", tmp_path / "after-the-cut"
    store = QdrantEdgeBackend(DIM, live)
    await store.start()
    try:
        await store.save_namespace(NamespaceRecord(NAME, "org", T0))
        for i in range(20):
            await store.upsert_memory(
                memory(NAME, content=f"memory {i}"), MemoryVectors(unit(1, i))
            )
        shutil.copytree(live, image)  # the disk at the cut: the log written, nothing flushed
    finally:
        await store.close()
    _tear_in_the_middle(faults.shard_dir(image, NAME) / "wal" / "open-1")

    store = QdrantEdgeBackend(DIM, image)
    await store.start()
    try:
        with pytest.raises(StorageDamaged, match=f"namespace {NAME} holds fewer memories"):
            await store.list_memories([NAME], everything(), 50)
        [problem] = store.condition().problems
        assert problem.startswith("1 namespace(s) hold fewer memories than recorded (lost from")
        assert f"{NAME} (" in problem
    finally:
        await store.close()
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(image))
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 1
    assert f"{NAME} (" in capsys.readouterr().out


def _tear_in_the_middle(log: Path) -> None:
    """Overwrite 64 bytes halfway through what the log segment holds."""
    used = len(log.read_bytes().rstrip(b"\0"))
    with open(log, "r+b") as segment:
        segment.seek(used // 2)
        segment.write(b"\xff" * 64)
