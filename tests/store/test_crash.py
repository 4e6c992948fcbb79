"""The embedded store across `kill -9`: at every step of a namespace delete, and on upgrade.

A namespace delete is three steps (adapters/qdrant/edge/edge_namespaces.py): bury the record
(one SQLite transaction: the namespace vanishes for callers), delete its
incarnation's points by filter, forget the purge. A child process is killed
with SIGKILL after each step; the store reopened afterwards must show the
namespace whole (killed before the bury) or gone with every memory, never
show old memories in a namespace re-created under the same name, and be
cleaned up by the janitor's `maintain()`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.qdrant.edge.edge_backend import QdrantEdgeBackend, edge_config
from adapters.qdrant.layout import memory_to_payload, namespace_to_json
from adapters.values import NamespaceRecord
from tests.support.records import DIM, T0, dense, everything, memory, unit
from tests.support.server_process import REPO_ROOT

DOOMED, KEPT = "org:doomed", "org:kept"

_CHILD = """
import asyncio, os, signal
from adapters.base import NamespaceRecord
from adapters.qdrant.edge.edge_backend import QdrantEdgeBackend
from tests.support.records import DIM, T0, memory, unit

async def main(steps):
    store = QdrantEdgeBackend(DIM, {data!r})
    await store.start()
    for name, count in (({doomed!r}, 20), ({kept!r}, 5)):
        await store.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
        for index in range(count):
            await store.upsert_memory(memory(name, content=f"{{name}} {{index}}"), unit(1, index))
    epoch = store._records.live[{doomed!r}].epoch
    done = [
        lambda: store._records.bury({doomed!r}),
        lambda: store._delete_incarnation({doomed!r}, epoch),
        lambda: store._records.purged(epoch),
    ]
    for step in done[:steps]:
        step()
    print(epoch, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main({steps}))
"""


def _run_killed(data: Path, steps: int) -> str:
    code = _CHILD.format(
        data=str(data),
        doomed=DOOMED,
        kept=KEPT,
        steps=steps,
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    return done.stdout.strip()


def _points(store: QdrantEdgeBackend) -> int:
    request = qe.CountRequest(filter=None, exact=True)
    return sum(int(shard.count(request)) for shard in store._shards.open_shards())


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
async def test_kill_at_every_step_of_a_delete(tmp_path: Path, steps: int) -> None:
    _run_killed(tmp_path, steps)
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        kept = await store.list_memories([KEPT], everything(), 100)
        assert len(kept) == 5
        if steps == 0:
            assert await store.get_namespace(DOOMED) is not None
            assert len(await store.list_memories([DOOMED], everything(), 100)) == 20
            return
        assert await store.get_namespace(DOOMED) is None
        assert await store.list_memories([DOOMED, KEPT], everything(), 100) == kept
        await store.save_namespace(NamespaceRecord(name=DOOMED, kind="org", created_at=T0))
        assert await store.list_memories([DOOMED], everything(), 100) == []
        assert await store.query_memories([DOOMED], dense(1), everything(), 100) == []
        assert len(store._records.purges) == (1 if steps < 3 else 0)
        await store.maintain()
        assert store._records.purges == {}
        assert _points(store) == 5
    finally:
        await store.close()


def _write_legacy(data: Path, name: str, rows: list[tuple[str, list[float]]]) -> None:
    """A namespace as plugin 0.1 stored it: its own shard, memory id = point id, a JSON record."""
    directory = data / "namespaces" / ("memory-" + name.replace(":", "~"))
    shard = qe.EdgeShard.create(str(directory / "shard"), edge_config(DIM))
    points = []
    for content, vector in rows:
        written = memory(name, content=content)
        points.append(qe.Point(written.id, vector, memory_to_payload(written)))
    shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()
    record = NamespaceRecord(name=name, kind="workspace", created_at=T0, metadata={"n": name})
    (directory / "namespace.json").write_text(namespace_to_json(record))


async def test_a_per_namespace_data_dir_is_migrated_at_start(tmp_path: Path) -> None:
    rows = {
        "workspace:a": [("a near", unit(1, 0.2)), ("a far", unit(0, 1))],
        "workspace:b": [("b only", unit(0.3, 1, 0.5))],
    }
    for name, written in rows.items():
        _write_legacy(tmp_path, name, written)
    (tmp_path / "namespaces" / "memory-workspace~half").mkdir()  # interrupted creation
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        assert sorted(r.name for r in await store.list_namespaces()) == sorted(rows)
        record = await store.get_namespace("workspace:a")
        assert record is not None
        assert record.metadata == {"n": "workspace:a"}
        hits = await store.query_memories(list(rows), dense(1), everything(), 10)
        # Vectors were copied, not recomputed: the scores are those of the stored vectors.
        assert [(h.memory.content, round(h.score, 5)) for h in hits] == [
            ("a near", round(1 / (1 + 0.04) ** 0.5, 5)),
            ("b only", round(0.3 / (0.09 + 1 + 0.25) ** 0.5, 5)),
            ("a far", 0.0),
        ]
        assert not (tmp_path / "namespaces").exists()
        assert (tmp_path / "namespaces.migrated" / "memory-workspace~a").is_dir()
    finally:
        await store.close()
    again = QdrantEdgeBackend(DIM, tmp_path)  # a second start finds nothing to migrate
    await again.start()
    assert _points(again) == 3
    await again.close()


async def test_an_interrupted_migration_is_redone_without_duplicates(tmp_path: Path) -> None:
    _write_legacy(tmp_path, "workspace:a", [("one", unit(1)), ("two", unit(0, 1))])
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "namespaces", copy)
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    epoch = store._records.live["workspace:a"].epoch
    await store.close()
    (tmp_path / "namespaces.migrated").rename(tmp_path / "first.migrated")
    copy.rename(tmp_path / "namespaces")  # as if killed before the rename at the end
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    assert store._records.live["workspace:a"].epoch == epoch
    assert _points(store) == 2
    assert sorted(
        m.content for m in await store.list_memories(["workspace:a"], everything(), 9)
    ) == [
        "one",
        "two",
    ]
    await store.close()
