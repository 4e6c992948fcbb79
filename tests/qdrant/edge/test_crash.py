"""The embedded store across `kill -9` at every step of a namespace delete.

A namespace delete is three steps (adapters/engine/edge_namespaces.py): bury the record
(one SQLite transaction: the namespace vanishes for callers), delete its
incarnation's points by filter, forget the purge. A child process is killed
with SIGKILL after each step; the store reopened afterwards must show the
namespace whole (killed before the bury) or gone with every memory, never
show old memories in a namespace re-created under the same name, and be
cleaned up by the janitor's `maintain()`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import NamespaceRecord
from harness.server_process import REPO_ROOT
from tests.support.backends import point_count
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything

DOOMED, KEPT = "org:doomed", "org:kept"

_CHILD = """
import asyncio, os, signal
from adapters.base import NamespaceRecord
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import MemoryVectors
from tests.support.records import DIM, T0, memory, unit

async def main(steps):
    store = QdrantEdgeBackend(DIM, {data!r})
    await store.start()
    for name, count in (({doomed!r}, 20), ({kept!r}, 5)):
        await store.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
        for index in range(count):
            written = memory(name, content=f"{{name}} {{index}}")
            await store.upsert_memory(written, MemoryVectors(unit(1, index)))
    parts = store.store
    epoch = parts.records.live[{doomed!r}].epoch
    done = [
        lambda: parts.records.bury({doomed!r}),
        lambda: parts.delete_incarnation({doomed!r}, epoch),
        lambda: parts.records.purged(epoch),
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
        records = store.store.records
        assert len(records.purges) == (1 if steps < 3 else 0)
        await store.maintain()
        assert records.purges == {}
        assert point_count(store) == 5
    finally:
        await store.close()
