"""The keyword-index upgrade of a previous-version store killed midway: in a child, in the server.

A `kill -9` in the middle of the upgrade loses nothing: the next start finishes it
(plugin/upgrades/vector_fill.py), in the adapter and in the real server over HTTP.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from harness.server_process import REPO_ROOT
from harness.server_process import ServerProcess
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.upgrades import vector_fill
from plugin.upgrades.vector_fill import BUILDING
from plugin.upgrades.vector_fill import COMPLETE
from plugin.upgrades.vector_fill import META_ENCODER
from plugin.upgrades.vector_fill import META_STATE
from tests.support.keyword_store import NAMES
from tests.support.keyword_store import RARE
from tests.support.keyword_store import matches
from tests.support.keyword_store import stored_keywords
from tests.support.keyword_store import write_previous_version
from tests.support.records import DIM
from tests.support.records import everything

_KILLED_MID_FILL = """
import asyncio, os, signal
from adapters.engine.edge_backend import QdrantEdgeBackend
from plugin.upgrades import vector_fill
from adapters.keyword_encoder import KeywordEncoder

pages = []

def progress(count):
    pages.append(count)
    if len(pages) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

async def main():
    store = QdrantEdgeBackend({dimension}, {data!r})
    await store.start()
    encoder = KeywordEncoder()
    await vector_fill.fill_store(store, vector_fill.keywords(encoder, page=50), progress)

asyncio.run(main())
"""


def kill_mid_fill(data: Path, dimension: int = DIM) -> None:
    """The upgrade of the store in `data`, whose vectors have `dimension` numbers, killed
    after two pages (the store's dimension: opening a shard gives it token vectors of
    that size)."""
    code = _KILLED_MID_FILL.format(data=str(data), dimension=dimension)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr


async def test_kill_9_in_the_middle_of_the_upgrade(old_store: Path) -> None:
    kill_mid_fill(old_store)
    store = QdrantEdgeBackend(DIM, old_store)
    await store.start()
    try:
        encoder = KeywordEncoder()
        meta = await store.store_meta.read_store_meta()
        assert (meta[META_ENCODER], meta[META_STATE]) == (encoder.identity, BUILDING)
        stored = stored_keywords(store)
        done = [v for _, v in stored.values() if v is not None]
        assert 100 <= len(done) < len(stored)  # two pages of 50 made it, not all
        # Meanwhile everything is served; indexed memories are found by their words.
        listed = await store.list_memories(NAMES, everything(), 100)
        assert len(listed) == 100
        report = await vector_fill.fill_store(store, vector_fill.keywords(encoder))
        assert report is not None
        assert report.indexed == len(stored) - len(done)
        assert (await store.store_meta.read_store_meta())[META_STATE] == COMPLETE
        for content, vector in stored_keywords(store).values():
            assert matches(vector, encoder.document(content)), content
    finally:
        await store.close()


# -- the real server, over HTTP ---------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path / "data", tmp_path / "server.log", log_level="INFO") as process:
        yield process


@pytest.mark.slow
def test_the_server_upgrades_a_previous_version_store_killed_midway(
    server: ServerProcess, encoder: SentenceTransformerEncoder
) -> None:
    """The store of the previous version, its upgrade killed by SIGKILL after two pages:
    the server starts on it, serves at once, and finishes the keyword index itself."""
    write_previous_version(server.data_dir, encoder)
    kill_mid_fill(server.data_dir, encoder.dimension)
    server.start()
    server.wait_healthy()

    async def search(session: aiohttp.ClientSession) -> list[str]:
        body = {"namespaces": NAMES, "query": "what happened to XJ-4471?", "limit": 2}
        async with session.post(f"{server.base_url}/v1/search", json=body) as response:
            assert response.status == 200
            return [hit["content"] for hit in (await response.json())["memories"]]

    async def until_indexed() -> list[str]:
        # A deadline, not a count of tries: on a loaded machine the server's start and
        # fill share two cores with everything else (200 tries once ran out).
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as session:
            while (found := await search(session)) != [RARE, RARE]:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            return found

    assert asyncio.run(until_indexed()) == [RARE, RARE]
    # The last page is searchable a moment before the index is recorded complete: the
    # server logs "keyword vectors indexed" once it is (a SIGTERM before that leaves
    # the index to finish at the next start, which is not what this test is about).
    deadline = time.monotonic() + 30
    while "keyword vectors indexed" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.terminate() == 0
    store = QdrantEdgeBackend(
        encoder.dimension, server.data_dir, token_dimension=encoder.token_dimension
    )

    async def state() -> dict[str, str]:
        await store.start()
        try:
            assert all(v is not None for _, v in stored_keywords(store).values())
            return dict(await store.store_meta.read_store_meta())
        finally:
            await store.close()

    assert asyncio.run(state())[META_STATE] == COMPLETE
