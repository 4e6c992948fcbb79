"""The server process never loads the engine's library: the embedded store's engine runs in its
worker process, which also makes the keyword vectors of memories and of searches
(`VectorBackend.makes_keywords`). A keyword search finds a memory by a rare word, so both
keyword vectors were made there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from harness.server_process import ServerProcess

NS = "workspace:apart"
ENGINE_LIBRARY = "qdrant_edge"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path / "data",
        tmp_path / "server.log",
        env={"MEMORY_PLUGIN_SEARCH": "keyword", "MEMORY_PLUGIN_BACKEND_TIMEOUT": "10"},
    )
    with process.start():
        process.wait_healthy()
        yield process


def mapped(pid: int) -> set[str]:
    """The files process `pid` has mapped."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}


async def test_the_server_maps_no_engine_while_its_store_makes_keyword_vectors(
    server: ServerProcess,
) -> None:
    url = f"{server.base_url}/v1/namespaces/{NS}"
    async with aiohttp.ClientSession() as session:
        async with session.put(url, json={"kind": "workspace"}) as put:
            assert put.status == 200
        for content in ("Zanzibar ferry leaves at noon", "the deploy failed on Friday"):
            body = {"content": content, "kind": "fact", "source": "agent"}
            async with session.post(f"{url}/memories", json=body) as commit:
                assert commit.status == 201
        search = {"namespaces": [NS], "query": "zanzibar", "limit": 5}
        async with session.post(f"{server.base_url}/v1/search", json=search) as found:
            assert found.status == 200
            hits = (await found.json())["memories"]
    assert [hit["content"] for hit in hits] == ["Zanzibar ferry leaves at noon"]
    assert server.proc is not None
    assert not {path for path in mapped(server.proc.pid) if ENGINE_LIBRARY in path}
    (worker,) = server.workers()
    assert {path for path in mapped(worker) if ENGINE_LIBRARY in path}
