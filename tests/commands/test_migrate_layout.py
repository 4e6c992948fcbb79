"""`memory-plugin-vector migrate-layout`: output, exit status, and what it leaves behind.

Runs against qdrant-client's in-process `:memory:` mode, shared by the source
(`collections`) and target (`shared`) backends, as a server would be.
"""

from __future__ import annotations

import pytest

from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from plugin.cli import main
from plugin.commands.migrate_layout import migrate
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


async def test_migrate_copies_reports_and_is_idempotent() -> None:
    connection = QdrantConnection(location=":memory:")
    old = QdrantCollectionsBackend(DIM, connection=connection)
    await old.start()
    for name in ("workspace:a", "team:b"):
        await old.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        await old.upsert_memory(memory(name, content=f"in {name}"), MemoryVectors(unit(1)))
    lines: list[str] = []

    async def run(drop: bool) -> int:
        source = QdrantCollectionsBackend(DIM, connection=connection)
        target = QdrantServerBackend(DIM, connection=connection)
        return await migrate(source, target, drop_source=drop, out=lines.append)

    assert await run(False) == 0
    assert sorted(lines[:2]) == ["copied team:b: 1 memories", "copied workspace:a: 1 memories"]
    assert lines[2].startswith("migrated 2 namespaces and 2 memories into the shared layout in ")
    lines.clear()
    assert await run(True) == 0
    assert lines[-1].endswith("; old collections dropped")
    shared = QdrantServerBackend(DIM, connection=connection)
    await shared.start()  # no per-namespace collection is left to refuse
    found = await shared.list_memories(["workspace:a", "team:b"], everything(), 10)
    assert sorted(m.content for m in found) == ["in team:b", "in workspace:a"]
    await shared.close()


def test_without_a_qdrant_server_it_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in ("QDRANT_URL", "MEMORY_PLUGIN_BACKEND"):
        monkeypatch.delenv(key, raising=False)
    assert main(["migrate-layout"]) == 2
    assert capsys.readouterr().out == (
        "migrate-layout moves a Qdrant server's data: set QDRANT_URL (and QDRANT_API_KEY)\n"
    )
