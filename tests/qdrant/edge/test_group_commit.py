"""Under the `sync` durability a write returns once it is on disk, in the right order.

The real embedded store, with its `fsync` and its count writes recorded: an
acknowledged upsert has had its shard's write-ahead log synced after the engine
wrote it, and its count written only after that (a count on disk ahead of its
memories would read as a loss after a power cut); a forget writes its count
before the engine deletes; concurrent writes share a sync; `async` syncs nothing.
A stalled sync keeps new writes out of the engine, then refuses them; a sync that waits
past the writes' deadline, or fails, is a problem health names until a sync completes, and
the writes the disk refused are counted. The power cut
itself is tests/qdrant/edge/test_power_loss.py; a stalled disk under a real server,
tests/qdrant/edge/test_disk_stall.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.log_sync import LogSync
from adapters.engine.log_sync import Pending
from adapters.engine.record_store import RecordStore
from adapters.errors import BackendUnavailable
from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from adapters.values import SYNC_BUCKETS
from adapters.values import Durability
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit

NAME = "workspace:synced"
Event = tuple[str, Any]


class Recorder:
    """What the store did, in order: engine updates, fsyncs (by path), count writes."""

    def __init__(self, backend: QdrantEdgeBackend) -> None:
        self.events: list[Event] = []
        self.fail_next: OSError | None = None
        self.counts_synced: list[bool] = []  # each count write: synced at its commit?
        store = backend.store
        counts = store.records.count_store  # every count written, held back or at once
        update, write_counts = store.update, counts.write

        def recorded_update(shard: Any, operation: Any) -> None:
            update(shard, operation)
            self.events.append(("update", None))

        def recorded_counts(changes: Mapping[str, int], *, synced: bool = False) -> None:
            write_counts(changes, synced=synced)
            self.events.append(("counts", dict(changes)))
            self.counts_synced.append(synced)

        def recorded_fsync(fd: int) -> None:
            if self.fail_next is not None:
                error, self.fail_next = self.fail_next, None
                raise error
            os.fsync(fd)
            self.events.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}"))))

        store.update = recorded_update
        counts.write = recorded_counts  # type: ignore[method-assign]
        store.log_sync.fsync = recorded_fsync

    def first(self, kind: str, where: Any = None) -> int:
        return next(i for i, (k, v) in enumerate(self.events) if k == kind and where in (None, v))

    def wal_syncs(self, shard: Path) -> list[int]:
        wal = shard / "wal"
        return [i for i, (k, v) in enumerate(self.events) if k == "fsync" and v.parent == wal]


def shard_dir(data_dir: Path) -> Path:
    return data_dir / "store" / "shards" / f"{shard_index(NAME, SHARD_COUNT):02d}"


def counted_on_disk(data_dir: Path) -> dict[str, int]:
    db = sqlite3.connect(data_dir / "store" / "counts.sqlite3")
    try:
        return dict(db.execute("SELECT epoch, memories FROM counts"))
    finally:
        db.close()


async def open_store(data_dir: Path, durability: Durability) -> AsyncIterator[QdrantEdgeBackend]:
    async with started(QdrantEdgeBackend(DIM, data_dir, durability=durability)) as store:
        await store.save_namespace(NamespaceRecord(NAME, "workspace", T0))
        yield store


@pytest.fixture
async def synced(tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
    async for store in open_store(tmp_path, "sync"):
        yield store


def epoch(store: QdrantEdgeBackend) -> str:
    return store.store.records.live[NAME].epoch


async def test_an_acknowledged_upsert_has_its_log_synced_then_its_count(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    recorder = Recorder(synced)

    await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))

    await synced.store.calls.synced_behind()  # the count is written behind the answer
    update = recorder.first("update")
    syncs = recorder.wal_syncs(shard_dir(tmp_path))
    counts = recorder.first("counts", {epoch(synced): 1})
    assert syncs
    assert update < min(syncs)
    assert max(syncs) < counts
    assert recorder.counts_synced == [False]  # behind its memories at worst: re-counted
    assert counted_on_disk(tmp_path) == {epoch(synced): 1}


async def test_a_count_whose_write_fails_is_written_by_the_next_sync(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    counts = synced.store.records.count_store
    write = counts.write
    failures = [sqlite3.OperationalError("database is locked")]

    def failing_once(changes: Mapping[str, int], *, synced: bool = False) -> None:
        if failures:
            raise failures.pop()
        write(changes, synced=synced)

    counts.write = failing_once  # type: ignore[method-assign]
    await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))
    await synced.store.calls.synced_behind()
    assert counted_on_disk(tmp_path) == {epoch(synced): 0}  # the write that failed
    await synced.upsert_memory(memory(NAME, id="m2"), MemoryVectors(unit(1)))
    await synced.store.calls.synced_behind()
    assert counted_on_disk(tmp_path) == {epoch(synced): 2}


async def test_a_new_shard_has_its_directory_entries_synced(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    recorder = Recorder(synced)

    await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))
    await synced.upsert_memory(memory(NAME, id="m2"), MemoryVectors(unit(2)))

    synced_dirs = [path for kind, path in recorder.events if kind == "fsync" and path.is_dir()]
    shard = shard_dir(tmp_path)
    assert synced_dirs.count(shard) == 1
    assert synced_dirs.count(shard.parent) == 1


async def test_concurrent_writes_share_one_sync(synced: QdrantEdgeBackend, tmp_path: Path) -> None:
    await synced.upsert_memory(memory(NAME, id="first"), MemoryVectors(unit(1)))
    await synced.store.calls.synced_behind()  # its count, written behind the answer
    recorder = Recorder(synced)

    await asyncio.gather(
        *(
            synced.upsert_memory(memory(NAME, id=f"m{n}"), MemoryVectors(unit(1, n)))
            for n in range(16)
        )
    )

    await synced.store.calls.synced_behind()
    count_writes = [v for k, v in recorder.events if k == "counts"]
    assert len(count_writes) <= 2, count_writes
    assert sum(sum(v.values()) for v in count_writes) == 16
    assert counted_on_disk(tmp_path) == {epoch(synced): 17}


async def test_a_forget_writes_its_count_before_the_engine_deletes(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))
    await synced.store.calls.synced_behind()  # its count, written behind the answer
    recorder = Recorder(synced)

    assert await synced.delete_memory(NAME, "m1")

    uncounted = recorder.first("counts", {epoch(synced): -1})
    delete = recorder.first("update")
    assert uncounted < delete < max(recorder.wal_syncs(shard_dir(tmp_path)))
    assert recorder.counts_synced == [True]  # on disk before the engine deletes
    assert counted_on_disk(tmp_path) == {epoch(synced): 0}


async def test_the_expiry_sweep_writes_its_counts_before_the_engine_deletes(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    expiring = memory(NAME, id="m1", expires_at=T0 + timedelta(seconds=1))
    await synced.upsert_memory(expiring, MemoryVectors(unit(1)))
    await synced.store.calls.synced_behind()  # its count, written behind the answer
    recorder = Recorder(synced)

    assert await synced.delete_expired_memories(T0 + timedelta(seconds=2)) == 1

    assert recorder.first("counts", {epoch(synced): -1}) < recorder.first("update")
    assert counted_on_disk(tmp_path) == {epoch(synced): 0}


async def test_a_failed_sync_refuses_the_writes_it_covered(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    recorder = Recorder(synced)
    recorder.fail_next = OSError(errno.EIO, "Input/output error")

    with pytest.raises(BackendUnavailable, match="Input/output error"):
        await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))
    await synced.upsert_memory(memory(NAME, id="m2"), MemoryVectors(unit(2)))

    assert recorder.wal_syncs(shard_dir(tmp_path))
    await synced.store.calls.synced_behind()  # the counts, written behind the answer
    assert counted_on_disk(tmp_path) == {epoch(synced): 2}


async def test_a_failed_sync_is_a_problem_until_a_sync_completes_without_a_write(
    synced: QdrantEdgeBackend, tmp_path: Path
) -> None:
    recorder = Recorder(synced)
    recorder.fail_next = OSError(errno.EIO, "Input/output error")

    with pytest.raises(BackendUnavailable):
        await synced.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))

    condition = synced.condition()
    assert condition.problems == (
        "writes cannot reach the disk: the last sync of the data volume failed (embedded"
        " store: Input/output error); writes answer 503 until a sync completes",
    )
    assert condition.disk is not None
    assert condition.disk.refused == (0, 0, 1, 0)  # volume_full, sync_timeout, sync_failed, stalled
    await synced.ping()  # health asks: the sync is tried again, in the background
    for _ in range(200):
        if not synced.condition().problems:
            break
        await asyncio.sleep(0.01)
    assert synced.condition().problems == ()
    await synced.store.calls.synced_behind()
    assert counted_on_disk(tmp_path) == {epoch(synced): 1}  # what the failed sync left


async def test_a_stalled_sync_holds_the_writes_out_of_the_engine_then_refuses_them(
    tmp_path: Path,
) -> None:
    """While a sync waits, a new write waits for it before it reaches the engine; once the
    sync has waited past a third of the deadline, a new write is refused at once; past the
    deadline, health names the sync. The engine meets no write while a sync is stalled."""
    backend = QdrantEdgeBackend(DIM, tmp_path, write_deadline_s=0.6)  # stalled after 0.2 s
    vectors = unit_vectors
    answering, syncing = threading.Event(), threading.Event()
    async with started(backend) as store:
        await store.save_namespace(NamespaceRecord(NAME, "workspace", T0))
        fsync, update = store.store.log_sync.fsync, store.store.update
        updates: list[float] = []
        watch = store.store.commit.watch

        def stalling(fd: int) -> None:
            syncing.set()
            answering.wait()  # the disk does not answer until set
            fsync(fd)

        def counted(shard: Any, operation: Any) -> None:
            update(shard, operation)
            updates.append(watch.waiting_s())

        store.store.log_sync.fsync = stalling
        store.store.update = counted  # type: ignore[method-assign]
        try:
            first = asyncio.create_task(store.upsert_memory(memory(NAME, id="m1"), vectors(1)))
            assert await asyncio.to_thread(syncing.wait, 10)  # m1 in the engine, its sync stalled
            behind = asyncio.create_task(store.upsert_memory(memory(NAME, id="m2"), vectors(2)))
            await asyncio.sleep(0.3)
            assert updates == [0.0]  # m2 waits for the sync, out of the engine
            assert not behind.done()
            assert store.condition().problems == ()  # within the deadline: nothing to say yet

            with pytest.raises(BackendUnavailable, match="writes are refused until it completes"):
                await store.upsert_memory(memory(NAME, id="m3"), vectors(3))
            assert updates == [0.0]
            first.cancel()  # its deadline passed while it waited for its sync
            with contextlib.suppress(asyncio.CancelledError):
                await first
            await asyncio.sleep(0.4)
            condition = store.condition()
        finally:
            answering.set()  # whatever happened: else closing waits for ever
        await behind
        assert updates == [0.0, 0.0]  # m2 went in once the sync was done, none running
        assert len(condition.problems) == 1
        assert condition.problems[0].startswith(
            "writes cannot reach the disk: a sync of the data volume has waited 0."
        ), condition.problems
        assert condition.disk is not None
        assert condition.disk.sync_waiting_s > 0.6
        # volume_full, sync_timeout (m1), sync_failed, disk_stalled (m3)
        assert condition.disk.refused == (0, 1, 0, 1)

        await store.upsert_memory(memory(NAME, id="m4"), vectors(4))
        condition = store.condition()
        assert condition.problems == ()
        assert condition.disk is not None
        assert condition.disk.sync_waiting_s == 0
        slow = SYNC_BUCKETS.index(0.5)  # the stalled sync took longer, the others less
        assert condition.disk.sync_buckets[-1] - condition.disk.sync_buckets[slow] == 1
        found = await store.get_memory(NAME, "m1")
        assert found is not None  # acknowledged late, but written: its sync completed


def unit_vectors(n: int) -> MemoryVectors:
    return MemoryVectors(unit(n))


async def test_async_syncs_nothing_and_counts_at_once(tmp_path: Path) -> None:
    async for store in open_store(tmp_path, "async"):
        recorder = Recorder(store)

        await store.upsert_memory(memory(NAME, id="m1"), MemoryVectors(unit(1)))
        assert await store.delete_memory(NAME, "m1")
        await store.upsert_memory(memory(NAME, id="m2"), MemoryVectors(unit(2)))

        counts = ("counts", {epoch(store): 1}), ("counts", {epoch(store): -1})
        assert [event for event in recorder.events if event[0] != "update"] == [
            counts[0],
            counts[1],
            counts[0],
        ]
        assert counted_on_disk(tmp_path) == {epoch(store): 1}


def test_only_the_segments_the_engine_may_have_written_are_synced(tmp_path: Path) -> None:
    """The engine appends to the lowest-numbered open segment (the next ones wait,
    empty), a full one is renamed closed and written no more (synced once), and
    `first-index` is rewritten only when the log is cut."""
    wal = tmp_path / "shard" / "wal"
    wal.mkdir(parents=True)
    for name in ("closed-0", "open-2", "open-3", "first-index"):
        (wal / name).write_bytes(b"x")
    synced: list[str] = []
    log_sync = LogSync(RecordStore(tmp_path / "records.sqlite3"))
    log_sync.fsync = lambda fd: synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
    pending = Pending({wal.parent})

    log_sync.write_logs(pending)
    assert synced == ["open-2", "closed-0", "first-index", "wal", "shard", tmp_path.name]
    synced.clear()
    log_sync.write_logs(pending)
    assert synced == ["open-2"]
    synced.clear()
    (wal / "open-2").rename(wal / "closed-7")  # the active segment filled up
    log_sync.write_logs(pending)
    assert synced == ["open-3", "closed-7", "wal"]
    log_sync.close()
