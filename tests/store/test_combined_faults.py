"""Two faults at once (issue 28): lost namespace records together with a shard that
does not open, a garbled payload page, or a volume too full to open the shards.

Each test builds a real store, closes it, damages it on disk, and opens it again:
it must start, serve every namespace of the readable shards whole, answer 503
naming the others (never a 404 or an empty answer), say `degraded`, and rebuild
the rest once the shard is readable again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from adapters.base import NamespaceRecord
from adapters.errors import StorageDamaged
from adapters.qdrant.edge.backend import QdrantEdgeBackend
from adapters.qdrant.edge.disk import free_bytes
from adapters.qdrant.edge.shards import SHARD_COUNT, shard_index
from plugin import cli
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings
from tests.support.app import AppFactory, served
from tests.support.clocks import WallClock
from tests.support.records import DIM, T0, everything, memory, unit

NAMES = [f"workspace:n{i:02d}" for i in range(24)]
MEMORIES = 4
BAD = NAMES[0]


def _shard_of(name: str) -> int:
    return shard_index(name, SHARD_COUNT)


def _shard_dir(data_dir: Path, name: str) -> Path:
    return data_dir / "store" / "shards" / f"{_shard_of(name):02d}"


async def _seed(data_dir: Path, dimension: int = DIM) -> None:
    store = QdrantEdgeBackend(dimension, data_dir)
    await store.start()
    try:
        for name in NAMES:
            await store.save_namespace(NamespaceRecord(name, "workspace", T0))
            for i in range(MEMORIES):
                vector = unit(1, i) + [0.0] * (dimension - DIM)
                await store.upsert_memory(memory(name, content=f"{name} {i}"), vector)
    finally:
        await store.close()


def _lose_records(data_dir: Path) -> None:
    records = data_dir / "store" / "namespaces.sqlite3"
    records.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        records.with_name(records.name + suffix).unlink(missing_ok=True)


def _break_manifest(data_dir: Path, name: str) -> tuple[Path, str]:
    manifest = next((_shard_dir(data_dir, name) / "segments").iterdir()) / "segment.json"
    text = manifest.read_text()
    manifest.write_text("{damaged")
    return manifest, text


def _garble(path: Path) -> None:
    with open(path, "r+b") as page:
        page.write(os.urandom(4096))


async def _answers(store: QdrantEdgeBackend) -> dict[str, str]:
    """Per namespace: `whole`, `503`, or what went wrong (the service names the
    namespace in a failed read's 503: tests/store/test_damage.py)."""
    found = {}
    for name in NAMES:
        try:
            record = await store.get_namespace(name)
            listed = [] if record is None else await store.list_memories([name], everything(), 50)
            found[name] = "whole" if len(listed) == MEMORIES else f"wrong: {len(listed)}"
        except StorageDamaged:
            found[name] = "503"
    return found


@pytest.fixture
async def seeded(tmp_path: Path) -> Path:
    await _seed(tmp_path)
    return tmp_path


async def test_lost_records_and_a_shard_that_does_not_open(seeded: Path) -> None:
    """Before: `cannot start` (the engine error while rebuilding), 0 namespaces served."""
    _lose_records(seeded)
    manifest, text = _break_manifest(seeded, BAD)
    down = {name for name in NAMES if _shard_of(name) == _shard_of(BAD)}
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        answers = await _answers(store)
        assert {n for n, a in answers.items() if a == "503"} == down
        assert {n for n, a in answers.items() if a == "whole"} == set(NAMES) - down
        condition = store.condition()
        assert condition.degraded
        assert set(condition.unreadable_namespaces) == down  # the names asked for
        assert condition.problems[0].startswith(
            f"namespace records lost while memory shard(s) {_shard_of(BAD):02d} could not"
        )
        with pytest.raises(StorageDamaged, match=f"namespace {BAD} is unknown for now"):
            await store.get_namespace(BAD)
        with pytest.raises(StorageDamaged, match="is unknown for now"):
            await store.save_namespace(NamespaceRecord(BAD, "workspace", T0))
        with pytest.raises(StorageDamaged, match="is unknown for now"):
            await store.delete_namespace(BAD)  # not a 404: it may exist
    finally:
        await store.close()
    # Still unknown after another start; repaired, the next start rebuilds what it holds.
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        assert {n for n, a in (await _answers(store)).items() if a == "503"} == down
    finally:
        await store.close()
    manifest.write_text(text)
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        assert set((await _answers(store)).values()) == {"whole"}
        assert store._records.lost_shards == set()
        assert store.condition().unreadable_namespaces == ()
    finally:
        await store.close()


async def test_a_shard_moved_aside_is_forgotten(seeded: Path) -> None:
    """The repair for a shard that does not open: its namespaces become absent (404),
    ready for the import that restores them."""
    _lose_records(seeded)
    _break_manifest(seeded, BAD)
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    await store.close()
    shutil.move(_shard_dir(seeded, BAD), seeded / "aside")
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        assert await store.get_namespace(BAD) is None
        assert store._records.lost_shards == set()
        await store.save_namespace(NamespaceRecord(BAD, "workspace", T0))
    finally:
        await store.close()


async def test_lost_records_and_a_garbled_payload_page(seeded: Path) -> None:
    """The issue's case: the shard opens, but some of its points cannot be read back.

    Records are rebuilt from the payload indexes; namespaces whose memories cannot be
    read answer 503 and health counts them from the start, before any read."""
    _lose_records(seeded)
    segment = next((_shard_dir(seeded, BAD) / "segments").iterdir())
    _garble(segment / "payload_storage" / "page_0.dat")
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        unreadable = set(store.condition().unreadable_namespaces)
        answers = await _answers(store)
        assert {n for n, a in answers.items() if a != "whole"} == unreadable
        assert unreadable, "the garbled page hid nothing: the test damages nothing"
        assert set(answers.values()) == {"whole", "503"}
    finally:
        await store.close()


async def test_lost_records_on_a_volume_too_full_to_open_the_shards(seeded: Path) -> None:
    """No shard opens (not enough room to map it): every name answers 503 with the disk's
    message; once there is room, the next health check opens them and rebuilds."""
    _lose_records(seeded)
    store = QdrantEdgeBackend(DIM, seeded, disk_headroom_bytes=free_bytes(seeded) + 2**40)
    await store.start()
    try:
        assert set((await _answers(store)).values()) == {"503"}
        assert "data volume is full" in str(store._store.lost.refusal(BAD))
        store._store.disk._headroom = 0  # room again
        await store.ping()
        assert set((await _answers(store)).values()) == {"whole"}
        assert store._records.lost_shards == set()
    finally:
        await store.close()


@pytest.mark.parametrize("engine_loss", ["none", "id tracker cut"])
async def test_lost_records_with_a_loss_in_the_engine(seeded: Path, engine_loss: str) -> None:
    """Before: the counts lived in the records' file and went with it, so a namespace
    rebuilt from what the engine still found listed part of its memories as if whole."""
    _lose_records(seeded)
    if engine_loss == "id tracker cut":
        _cut_tracker(seeded, BAD)
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        answers = await _answers(store)
        short = {n for n, a in answers.items() if a != "whole"}
        if engine_loss == "none":
            assert short == set()
            assert store.condition().problems == ()
        else:
            assert short == {BAD}, answers
            assert answers[BAD] == "503"
            [problem] = store.condition().problems
            assert problem.startswith("1 namespace(s) hold fewer memories than recorded")
    finally:
        await store.close()


def _cut_tracker(data_dir: Path, name: str) -> None:
    trackers = (_shard_dir(data_dir, name) / "segments").glob("*/mutable_id_tracker.mappings")
    tracker = max(trackers, key=lambda path: path.stat().st_size)
    os.truncate(tracker, tracker.stat().st_size // 2)


async def test_records_and_counts_lost_stay_degraded_until_accepted(
    seeded: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both files lost: a loss in the engine at the same time (an id tracker cut, a WAL
    garbled) could not show, so health says so until an operator vouches for them."""
    _lose_records(seeded)
    (seeded / "store" / "counts.sqlite3").write_bytes(b"")
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        [problem] = store.condition().problems
        assert problem.startswith(f"{len(NAMES)} namespace record(s) rebuilt from their memories")
        assert await store.list_memories([BAD], everything(), 50)
    finally:
        await store.close()
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(seeded))
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 1
    capsys.readouterr()
    assert await asyncio.to_thread(cli.main, ["verify-store", "--accept"]) == 0
    out = capsys.readouterr().out
    assert f"accepted {len(NAMES)} namespace(s) as they are now" in out
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 0


async def test_counts_of_a_store_from_before_move_to_their_own_file(seeded: Path) -> None:
    counts = seeded / "store" / "counts.sqlite3"
    counts.unlink()
    for suffix in ("-wal", "-shm"):
        counts.with_name(counts.name + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(seeded / "store" / "namespaces.sqlite3")
    with db:
        db.executemany(
            "INSERT INTO counts VALUES ((SELECT epoch FROM namespaces WHERE name = ?), ?)",
            [(name, MEMORIES + (name == BAD)) for name in NAMES],
        )
    db.close()
    store = QdrantEdgeBackend(DIM, seeded)
    await store.start()
    try:
        [problem] = store.condition().problems  # BAD's count from before says one more
        assert f"{BAD} ({MEMORIES} of {MEMORIES + 1})" in problem
        assert counts.is_file()
    finally:
        await store.close()


async def test_over_http_the_unknown_namespace_is_a_503_naming_itself(
    settings: Settings, encoder: SentenceTransformerEncoder, make_app: AppFactory, clock: WallClock
) -> None:
    await _seed(settings.data_dir, encoder.dimension)
    _lose_records(settings.data_dir)
    _break_manifest(settings.data_dir, BAD)
    async for api in served(make_app, clock):
        reply = await api.search(BAD)
        assert reply.status == 503
        assert reply.body["message"].startswith(f"namespace {BAD} is unknown for now")
        health = await api.call("GET", "/v1/health")
        assert (health.status, health.body["status"], health.body["unreadable_namespaces"]) == (
            200,
            "degraded",
            1,
        )
        good = next(n for n in NAMES if _shard_of(n) != _shard_of(BAD))
        assert (await api.search(good)).status == 200
