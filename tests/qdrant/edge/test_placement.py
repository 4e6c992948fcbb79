"""The embedded store moved between engine worker counts in place (qdrant/edge/placement.py).

A store written with one count serves every memory, record and count with another, and
back; a move cut at any step, by a crash or by a power cut, is finished by the next start;
a store whose records cannot be read is not moved; and the server's own path
(`engine_workers`, then a pool of worker processes) serves a store another count wrote.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.pool import placement
from adapters.pool.embedded_store import embedded_store
from adapters.pool.embedded_store import engine_workers
from adapters.pool.placement import part_dir
from adapters.store_files import SHARD_COUNT
from adapters.store_files import lock_file
from adapters.store_files import shard_index
from adapters.store_files import worker_of
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from plugin.backends import build_backend
from plugin.settings import Settings
from plugin.sizing import engine_workers_of
from tests.support.backends import copy_of
from tests.support.backends import in_own_loop
from tests.support.power_cut import PowerCutMount
from tests.support.power_cut import unavailable
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

NAMES = [f"workspace:w{i}" for i in range(48)]
PER_NAMESPACE = 2


def contents(name: str) -> list[str]:
    return [f"{name} memory {i}" for i in range(PER_NAMESPACE)]


EXPECTED = {name: contents(name) for name in NAMES}


def test_the_names_lie_in_every_shard() -> None:
    assert {shard_index(name, SHARD_COUNT) for name in NAMES} == set(range(SHARD_COUNT))


async def write(data: Path, workers: int) -> None:
    """The store a plugin of `workers` engine workers writes: each part its namespaces."""
    for worker in range(workers):
        part = QdrantEdgeBackend(DIM, part_dir(data, workers, worker), partitions=workers)
        await part.start()
        try:
            for name in NAMES:
                if worker_of(name, workers) != worker:
                    continue
                await part.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
                for text in contents(name):
                    await part.upsert_memory(memory(name, content=text), MemoryVectors(unit(1)))
        finally:
            await part.close()


async def served(data: Path, workers: int) -> dict[str, list[str]]:
    """Each namespace's memories as the parts of `workers` serve them, each part only its
    own namespaces, none of them degraded (a count or a record missing would be)."""
    found: dict[str, list[str]] = {}
    for worker in range(workers):
        part = QdrantEdgeBackend(DIM, part_dir(data, workers, worker), partitions=workers)
        await part.start()
        try:
            condition = part.condition()
            assert (condition.problems, condition.unreadable_namespaces) == ((), ())
            for name in NAMES:
                record = await part.get_namespace(name)
                if worker_of(name, workers) != worker:
                    assert record is None, (name, worker)
                    continue
                assert record == NamespaceRecord(name=name, kind="team", created_at=T0)
                listed = await part.list_memories([name], everything(), 10)
                found[name] = sorted(m.content for m in listed)
        finally:
            await part.close()
    return found


def tops(data: Path) -> set[str]:
    return {entry.name for entry in data.iterdir() if entry.is_dir()}


async def test_a_store_of_two_workers_serves_whole_with_one_four_sixteen_and_two_again(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    await write(data, 2)
    written = 2
    for asked in (1, 4, 16, 2):
        placement.move(data, written, asked)
        assert await served(data, asked) == EXPECTED, (written, asked)
        assert tops(data) == {"store" if asked == 1 else "workers"}
        assert not (data / placement.JOURNAL).exists()
        written = asked


@pytest.fixture(scope="module")
def one_worker_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("one-worker") / "data"
    in_own_loop(write(data, 1))
    return data


class Cut(Exception):
    """The move stopped here, as by `kill -9`: what it did so far stays, nothing more."""


SYNC = placement.fsync_path


def cut_after(syncs: int, cut: Callable[[], None] = lambda: None) -> Callable[[Path], None]:
    """`fsync_path` that stops the move after `syncs` calls (calling `cut` first)."""
    done = [0]

    def sync(path: Path) -> None:
        if done[0] == syncs:
            cut()
            raise Cut(syncs)
        done[0] += 1
        SYNC(path)

    return sync


def syncs_of_a_move(data: Path, written: int, asked: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many syncs the whole move of `data` makes."""
    calls = [0]

    def counted(path: Path) -> None:
        calls[0] += 1
        SYNC(path)

    with monkeypatch.context() as patched:
        patched.setattr(placement, "fsync_path", counted)
        placement.move(data, written, asked)
    return calls[0]


@pytest.mark.long
@pytest.mark.parametrize(("written", "asked"), [(1, 4), (4, 2), (2, 1)])
async def test_a_move_cut_at_any_step_is_finished_by_the_next_start(
    one_worker_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    written: int,
    asked: int,
) -> None:
    source = tmp_path / "source"
    copy_of(one_worker_store, source)
    if written != 1:
        placement.move(source, 1, written)
    whole = tmp_path / "whole"
    copy_of(source, whole)
    total = syncs_of_a_move(whole, written, asked, monkeypatch)
    assert total > 20
    # the first sync is the journal's, before it is in place: from the second on, a move
    # is under way; the last is the data directory's, after the journal went
    cuts = sorted({1, *range(total // 5, total, total // 5), total - 1})
    for syncs in cuts:
        data = tmp_path / f"cut-{syncs}"
        copy_of(source, data)
        with monkeypatch.context() as patched:
            patched.setattr(placement, "fsync_path", cut_after(syncs))
            with pytest.raises(Cut):
                placement.move(data, written, asked)
        # the next start, whatever it asks for, finishes the move under way first
        assert engine_workers(data, None, cores=2) == asked
        assert await served(data, asked) == EXPECTED, syncs
        assert not {placement.JOURNAL, placement.STAGING, placement.OLD} & {
            entry.name for entry in data.iterdir()
        }


@pytest.mark.long
@pytest.mark.skipif(unavailable() is not None, reason=f"no power cut here: {unavailable()}")
async def test_a_power_cut_during_a_move_loses_nothing(
    one_worker_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move on a filesystem that loses every write not synced when the power goes
    (tests/support/power_cut_fs.py): after the cut, the next start on what the disk kept
    finishes the move and serves every memory."""
    whole = tmp_path / "whole"
    copy_of(one_worker_store, whole)
    total = syncs_of_a_move(whole, 1, 4, monkeypatch)
    for syncs in (1, total // 4, total // 2, 3 * total // 4, total - 1):
        disk = tmp_path / f"disk-{syncs}"
        copy_of(one_worker_store, disk / "data")
        mount = PowerCutMount(disk, tmp_path / f"mnt-{syncs}", tmp_path / f"fs-{syncs}.log")
        mount.mount()
        try:
            with monkeypatch.context() as patched:
                patched.setattr(placement, "fsync_path", cut_after(syncs, mount.cut))
                with pytest.raises((Cut, OSError)):  # OSError: the dead mount's files
                    placement.move(mount.mountpoint / "data", 1, 4)
        finally:
            mount.cut()
        assert engine_workers(disk / "data", None, cores=2) == 4
        assert await served(disk / "data", 4) == EXPECTED, syncs


async def test_records_that_cannot_be_read_are_not_moved(
    one_worker_store: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    copy_of(one_worker_store, data)
    (data / "store" / "namespaces.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(BackendMisconfigured) as refused:
        engine_workers(data, 2, cores=2)
    assert "MEMORY_PLUGIN_ENGINE_WORKERS=1 once" in str(refused.value)
    assert {entry.name for entry in data.iterdir()} == {"store", "engine.lock"}


async def test_a_store_in_use_is_not_moved(one_worker_store: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    copy_of(one_worker_store, data)
    with lock_file(data) as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BackendUnavailable, match="another process holds"):
            engine_workers(data, 4, cores=2)
    assert not (data / placement.JOURNAL).exists()
    assert await served(data, 1) == EXPECTED


@pytest.mark.parametrize(
    ("declared", "cpus", "workers"),
    [
        (None, 64, 1),  # CPUs measured, not declared: the store's own count
        (4, 4, 2),  # declared (the chart: the pod's CPU request): one worker per two
        (64, 64, 4),  # at most four by default
    ],
)
async def test_declared_cpus_choose_the_count_measured_ones_keep_the_store_own(
    one_worker_store: Path, tmp_path: Path, declared: int | None, cpus: int, workers: int
) -> None:
    """`plugin/backends.py`'s rule for an unset count, on a store one worker wrote, as a
    pod on a bigger node than the one that wrote it builds it (`cpus`: what it may use)."""
    data = tmp_path / "data"
    copy_of(one_worker_store, data)
    declaring = {} if declared is None else {"MEMORY_PLUGIN_CPUS": str(declared)}
    settings = Settings.from_env({"MEMORY_PLUGIN_DATA_DIR": str(data), **declaring})
    assert engine_workers_of(build_backend(settings, DIM, cpus=cpus)) == workers
    assert placement.written_with(data) == workers
    assert await served(data, workers) == EXPECTED


async def test_the_server_serves_a_store_of_one_worker_with_two(
    one_worker_store: Path, tmp_path: Path
) -> None:
    """`plugin/backends.py`'s path: the count decided, the store moved, the pool started."""
    data = tmp_path / "data"
    copy_of(one_worker_store, data)
    workers = engine_workers(data, 2, cores=2)
    assert workers == 2
    store = embedded_store(DIM, data, workers)
    await store.start()
    try:
        listed = await store.list_memories(NAMES, everything(), 1000)
        found: dict[str, list[str]] = {}
        for m in listed:
            found.setdefault(m.namespace, []).append(m.content)
        assert {name: sorted(texts) for name, texts in found.items()} == EXPECTED
        assert not store.condition().degraded
    finally:
        await store.close()
