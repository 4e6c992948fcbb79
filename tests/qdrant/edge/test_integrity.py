"""The embedded store checks itself and rebuilds what it can.

Each test builds a real store through the real app, closes it, damages it on
disk the way a bad disk or a careless hand would, and opens it again: a loss is
health `degraded` naming the namespaces (never `ok`), lost namespace records are
rebuilt from the memories, a purge never reaches another namespace, and a
search of nothing but an unreadable namespace is a 503.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.integrity import kind_of
from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.clocks import WallClock
from plugin import cli
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.app import create_app
from plugin.http.keys import SERVICE
from plugin.settings import Settings
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import app_settings
from tests.support.app import contract_health
from tests.support.app import served
from tests.support.backends import copy_of
from tests.support.backends import in_own_loop
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit

GOOD, BAD = "workspace:good", "team:bad"
CAPABILITIES = ["embedding", "ttl", "pin"]


@pytest.fixture(scope="module")
def written_through_the_app(
    tmp_path_factory: pytest.TempPathFactory, encoder: SentenceTransformerEncoder
) -> Path:
    """A data dir with BAD's 3 memories written first, then GOOD's 20, written once through
    the app: each test damages a copy of its own (`seeded`)."""
    data = tmp_path_factory.mktemp("integrity") / "data"
    clock = WallClock()

    async def write() -> None:
        settings = app_settings(data)
        async for api in served(lambda: create_app(settings, encoder=encoder, clock=clock), clock):
            for name, count in ((BAD, 3), (GOOD, 20)):
                assert (await api.put_ns(name, kind=kind_of(name))).status == 200
                for i in range(count):
                    assert (await api.commit(name, f"memory {i} of {name}")).status == 201

    in_own_loop(write())
    return data


@pytest.fixture
def seeded(written_through_the_app: Path, settings: Settings) -> Path:
    """The test's data dir, holding a copy of `written_through_the_app`."""
    return copy_of(written_through_the_app, Path(settings.data_dir))


def _shard_dir(data_dir: Path, name: str) -> Path:
    return data_dir / "store" / "shards" / f"{shard_index(name, SHARD_COUNT):02d}"


def _records(data_dir: Path) -> Path:
    return data_dir / "store" / "namespaces.sqlite3"


def _sql(data_dir: Path, statement: str, *args: str) -> None:
    db = sqlite3.connect(_records(data_dir))
    with db:
        db.execute(statement, args)
    db.close()


async def _found(api: ContractClient, name: str) -> int:
    reply = await api.search(name, limit=100)
    assert reply.status == 200, reply.body
    return len(reply.body["memories"])


async def _health(api: ContractClient) -> tuple[int, dict[str, object]]:
    """Status and body, less what health carries beside the contract's fields."""
    reply = await api.call("GET", "/v1/health")
    return reply.status, contract_health(reply.body)


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("damage", ["truncated", "garbled header", "deleted"])
async def test_lost_records_are_rebuilt_from_the_memories(
    seeded: Path,
    make_app: AppFactory,
    clock: WallClock,
    caplog: pytest.LogCaptureFixture,
    damage: str,
) -> None:
    """Before: truncated or deleted, every namespace answered 404 with its memories
    orphaned on disk; a garbled header stopped the plugin from starting at all."""
    path = _records(seeded)
    if damage == "truncated":
        path.write_bytes(b"")
    elif damage == "garbled header":
        path.write_bytes(b"\xde\xad\xbe\xef" * 16 + path.read_bytes()[64:])
    else:
        path.unlink()
    async for api in served(make_app, clock):
        assert (await _found(api, GOOD), await _found(api, BAD)) == (20, 3)
        # The counts survived in counts.sqlite3: the rebuilt ones are checked.
        assert await _health(api) == (
            200,
            {"status": "ok", "version": "1.0.0", "capabilities": CAPABILITIES},
        )
        # The rebuilt namespace serves writes in the same incarnation.
        assert (await api.commit(BAD, "one more")).status == 201
        assert await _found(api, BAD) == 4
    rebuilt = [line for line in _errors(caplog) if "rebuilt 2 namespace record(s)" in line]
    assert len(rebuilt) == 1, _errors(caplog)
    assert GOOD in rebuilt[0]
    assert BAD in rebuilt[0]
    aside = list(path.parent.glob("namespaces.sqlite3.damaged-*"))
    assert len(aside) == (1 if damage == "garbled header" else 0)


async def test_a_deleted_record_row_is_rebuilt(
    seeded: Path, make_app: AppFactory, clock: WallClock
) -> None:
    _sql(seeded, "DELETE FROM namespaces WHERE name = ?", BAD)
    async for api in served(make_app, clock):
        assert await _found(api, BAD) == 3
        put = await api.put_ns(BAD, kind="team")
        assert (put.status, put.body["kind"]) == (200, "team")


async def test_a_changed_epoch_is_degraded_naming_the_namespace(
    seeded: Path, make_app: AppFactory, clock: WallClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: 200 with 0 memories and health `ok`."""
    _sql(seeded, "UPDATE namespaces SET epoch = 'not-the-epoch' WHERE name = ?", BAD)
    async for api in served(make_app, clock):
        status, body = await _health(api)
        assert (status, body["status"]) == (200, "degraded")
        assert body["message"] == (
            f"memories of 1 namespace(s) belong to no recorded incarnation: {BAD};"
            " see docs/repair.md#memories-of-no-recorded-incarnation"
        )
        assert await _found(api, GOOD) == 20
    assert any(BAD in line and "store integrity" in line for line in _errors(caplog))


async def test_memories_lost_from_the_engine_make_health_degraded(
    seeded: Path, make_app: AppFactory, clock: WallClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Points gone behind the records' back (what a truncated id tracker or a damaged
    WAL does): before, health said `ok` and nothing was logged."""
    shard = qe.EdgeShard.load(str(_shard_dir(seeded, GOOD)))
    ns_is_good = qe.FieldCondition("ns", match=qe.MatchValue(GOOD))
    doomed, _ = shard.scroll(qe.ScrollRequest(limit=5, filter=qe.Filter(must=[ns_is_good])))
    shard.update(qe.UpdateOperation.delete_points([p.id for p in doomed]))
    shard.flush()
    shard.close()
    async for api in served(make_app, clock):
        status, body = await _health(api)
        assert (status, body["status"]) == (200, "degraded")
        assert body["message"] == (
            f"1 namespace(s) hold fewer memories than recorded (lost from the store's files):"
            f" {GOOD} (15 of 20); see docs/repair.md#memories-lost-from-the-stores-files"
        )
        async with api.client.get("/metrics") as response:
            assert "memory_plugin_store_problems 1.0" in await response.text()
        # Never a partial list: GOOD answers 503 naming itself; BAD is whole.
        for reply in (await api.search(GOOD), await api.search(GOOD, query="memory")):
            assert reply.status == 503
            assert GOOD in reply.body["message"]
        assert await _found(api, BAD) == 3
        both = await api.search(GOOD, BAD, limit=100)
        assert {m["namespace"] for m in both.body["memories"]} == {BAD}
        assert (await api.commit(GOOD, "writes go on: an import can restore")).status == 201
    assert any(GOOD in line and "15 of 20" in line for line in _errors(caplog))


async def test_a_purge_deletes_by_namespace_and_epoch_together(
    seeded: Path, make_app: AppFactory, clock: WallClock
) -> None:
    """Before: with BAD's damaged record carrying GOOD's epoch, deleting BAD purged GOOD."""
    db = sqlite3.connect(_records(seeded))
    (good_epoch,) = db.execute("SELECT epoch FROM namespaces WHERE name = ?", (GOOD,)).fetchone()
    db.close()
    _sql(
        seeded,
        "UPDATE namespaces SET epoch = ?, record = '{broken' WHERE name = ?",
        good_epoch,
        BAD,
    )
    async for api in served(make_app, clock):
        assert (await api.call("DELETE", f"/v1/namespaces/{BAD}")).status == 204
        await api.app[SERVICE].backend.maintain()
        assert await _found(api, GOOD) == 20


async def test_a_search_of_only_unreadable_namespaces_is_503(
    seeded: Path, make_app: AppFactory, clock: WallClock
) -> None:
    """Before: 200 with no memories, as if the namespace were empty."""
    _sql(seeded, "UPDATE namespaces SET record = '{broken' WHERE name = ?", BAD)
    async for api in served(make_app, clock):
        unreadable = {
            "code": "unavailable",
            "message": f"namespace {BAD} is unreadable in the embedded store; an operator can "
            "repair or drop it (docs/repair.md#unreadable-namespace)",
        }
        for reply in (await api.search(BAD), await api.search(BAD, query="memory")):
            assert (reply.status, reply.body) == (503, unreadable)
        assert await _found(api, GOOD) == 20  # and a search of both serves GOOD's
        both = await api.search(GOOD, BAD, limit=100)
        assert {m["namespace"] for m in both.body["memories"]} == {GOOD}


async def test_counts_follow_every_kind_of_write(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        name = "org:counted"
        await store.save_namespace(NamespaceRecord(name, "org", T0))
        epoch = store.store.records.live[name].epoch
        first = memory(name, content="first")
        await store.upsert_memory(first, MemoryVectors(unit(1, 0)))
        await store.upsert_memory(first, MemoryVectors(unit(1, 0)))  # a retry: the same memory
        later = memory(name, content="expires", expires_at=T0 + timedelta(hours=1))
        await store.upsert_memory(later, MemoryVectors(unit(1, 1)))
        batch: list[tuple[MemoryRecord, list[float]]] = [
            (memory(name, content=f"imported {i}"), unit(1, 2 + i)) for i in range(3)
        ]
        assert await store.transfer.upsert_memories(batch + batch[:1]) == 4
        assert store.store.records.count_store.counts[epoch] == 5
        assert await store.delete_memory(name, first.id)
        assert await store.delete_expired_memories(T0 + timedelta(hours=2)) == 1
        assert store.store.records.count_store.counts[epoch] == 3
        assert await store.verify() == ()
    finally:
        await store.close()
    reopened = QdrantEdgeBackend(DIM, tmp_path)
    await reopened.start()
    try:
        assert reopened.store.records.count_store.counts == {epoch: 3}
        assert reopened.condition().problems == ()
    finally:
        await reopened.close()


def test_kind_comes_from_the_name_prefix() -> None:
    assert [kind_of(n) for n in ("workspace:a", "team:b", "org:c", "x:d", "plain")] == [
        "workspace",
        "team",
        "org",
        "custom",
        "custom",
    ]


async def _stored(data_dir: Path, name: str, count: int) -> None:
    """A stopped store holding `count` memories of `name`."""
    store = QdrantEdgeBackend(DIM, data_dir)
    await store.start()
    await store.save_namespace(NamespaceRecord(name, "org", T0))
    for i in range(count):
        await store.upsert_memory(memory(name, content=f"memory {i}"), MemoryVectors(unit(1, i)))
    await store.close()


async def test_a_truncated_id_tracker_is_reported(tmp_path: Path) -> None:
    """Real damage to an engine file: the id tracker cut in half hides memories."""
    name = "org:tracked"
    await _stored(tmp_path, name, 5)
    segment = next((_shard_dir(tmp_path, name) / "segments").iterdir())
    tracker = segment / "mutable_id_tracker.mappings"
    os.truncate(tracker, tracker.stat().st_size // 2)
    reopened = QdrantEdgeBackend(DIM, tmp_path)
    await reopened.start()
    try:
        [problem] = reopened.condition().problems
        assert problem.startswith("1 namespace(s) hold fewer memories than recorded")
        assert f"{name} (" in problem
        assert await reopened.verify() == (problem,)  # and on demand, as verify-store asks
    finally:
        await reopened.close()


async def test_verify_store_checks_a_stopped_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "org:checked"
    await _stored(tmp_path, name, 4)
    monkeypatch.setenv("MEMORY_PLUGIN_DATA_DIR", str(tmp_path))
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 0
    assert capsys.readouterr().out == (
        "verify-store: ok: every namespace record agrees with the memories stored\n"
    )
    counts = sqlite3.connect(tmp_path / "store" / "counts.sqlite3")
    with counts:
        counts.execute("UPDATE counts SET memories = 9")
    counts.close()
    assert await asyncio.to_thread(cli.main, ["verify-store"]) == 1
    assert capsys.readouterr().out == (
        "verify-store: 1 namespace(s) hold fewer memories than recorded (lost from the"
        f" store's files): {name} (4 of 9);"
        " see docs/repair.md#memories-lost-from-the-stores-files\n"
    )


async def test_verify_store_asks_a_running_plugin(
    seeded: Path, make_app: AppFactory, clock: WallClock, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(seeded, "UPDATE namespaces SET record = '{broken' WHERE name = ?", BAD)
    async for api in served(make_app, clock):
        url = str(api.client.make_url("/"))
        assert await asyncio.to_thread(cli.main, ["verify-store", "--url", url]) == 1
        assert capsys.readouterr().out == f"verify-store: 1 namespace(s) unreadable: {BAD}\n"
        async with api.client.get("/admin/verify") as reply:  # outside the contract
            assert (reply.status, await reply.json()) == (
                200,
                {"status": "problems", "problems": [f"1 namespace(s) unreadable: {BAD}"]},
            )
