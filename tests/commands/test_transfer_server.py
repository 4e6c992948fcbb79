"""Backing up a running plugin: `GET /admin/export` and `export --from-url`.

The embedded store belongs to the server process, so a backup of a live pod is
read through the server itself, while the platform keeps writing.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from datetime import UTC
from datetime import datetime
from datetime import timedelta

from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from plugin.commands.export_import import ProgressBar
from plugin.commands.export_import import export_remote
from plugin.http.keys import BACKEND
from tests.support.app import ContractClient

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


async def test_export_of_a_running_server_while_it_takes_writes(api: ContractClient) -> None:
    backend = api.app[BACKEND]
    names = [f"workspace:w{i}" for i in range(3)]
    seeded: list[MemoryRecord] = []
    for n, name in enumerate(names):
        await backend.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        batch = [
            MemoryRecord(
                id=f"{n:08x}-0000-4000-8000-{i:012x}",
                namespace=name,
                content=f"seeded {i}",
                kind="fact",
                source="agent",
                created_at=T0 + timedelta(seconds=i),
            )
            for i in range(300)
        ]
        await backend.transfer.upsert_memories([(m, [1.0] + [0.0] * 383) for m in batch])
        seeded += batch

    async def keep_writing() -> int:
        written = 0
        for i in range(15):
            reply = await api.commit(names[i % 3], f"written during the export {i}")
            assert reply.status == 201
            written += 1
        return written

    out = io.BytesIO()
    url = str(api.client.make_url("/"))
    (namespaces, memories), written = await asyncio.gather(
        export_remote(url, out, ProgressBar("test")), keep_writing()
    )
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["type"] == "header"
    assert lines[0]["fingerprint"].endswith("/torch")
    assert lines[-1]["type"] == "end"
    assert lines[-1]["memories"] == memories
    exported = Counter((r["namespace"], r["id"]) for r in lines if r["type"] == "memory")
    assert max(exported.values()) == 1  # nothing twice
    assert {(m.namespace, m.id) for m in seeded} <= set(exported)  # nothing live missed
    assert namespaces == 3
    assert 900 <= memories <= 900 + written


async def test_export_route_answers_503_when_the_store_is_down(api: ContractClient) -> None:
    await api.app[BACKEND].close()  # the embedded store closed under the server
    reply = await api.call("GET", "/admin/export", check=False)
    assert reply.status == 503
    assert reply.body["code"] == "unavailable"
