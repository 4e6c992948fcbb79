"""Every acknowledged write survives a power cut at a random moment (`sync` durability).

The real server runs on a filesystem that keeps every write not yet synced in
memory and drops it when the power is cut (tests/support/power_cut_fs.py).
Eight writers write to their own namespaces, every kind of write, until the
cut; the server is killed with it, started again on what was synced, and each
writer's namespaces are read back: every acknowledged write is there, the one
in flight is there whole or not at all, with its wordpieces (the rerank's document
frequencies: the token fill finds nothing to give), and health is `ok` (the counts agree
with the memories: a count ahead of its memories would read as a loss). Six
cuts, then `verify-store` on the stopped store. Under `async`, the same cut
loses acknowledged writes: the test can tell.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess
from tests.support.acknowledged import Writer
from tests.support.acknowledged import check
from tests.support.backends import copy_of
from tests.support.cli import run_cli
from tests.support.power_cut import PowerCutMount
from tests.support.power_cut import unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.skipif(unavailable() is not None, reason=f"no power cut here: {unavailable()}"),
]

WRITERS = 8
CUTS = 6
SEED = 43


class Node:
    """The plugin on the power-cut filesystem: powered on, written to, cut."""

    def __init__(self, mount: PowerCutMount, logs: Path, durability: str) -> None:
        self.mount, self.logs, self.durability = mount, logs, durability
        self.server: ServerProcess | None = None
        self.boots = 0

    def power_on(self) -> ServerProcess:
        self.mount.mount()
        self.boots += 1
        env = {
            **WIDE_SHARES,
            "MEMORY_PLUGIN_DURABILITY": self.durability,
            # A filesystem in Python is slow (a new shard's log is 32 MiB): no deadline.
            "MEMORY_PLUGIN_BACKEND_TIMEOUT": "10",
        }
        log = self.logs / f"server-{self.boots}.log"
        self.server = ServerProcess(self.mount.mountpoint / "data", log, env=env).start()
        self.server.wait_healthy(60)
        return self.server

    def power_cut(self) -> None:
        self.mount.cut()  # the disk keeps what was synced, nothing more
        if self.server is not None:
            self.server.close()  # the process dies with the machine

    def shut_down(self) -> None:
        if self.server is not None:
            self.server.terminate()
        self.mount.cut()


@pytest.fixture
def node(tmp_path: Path, request: pytest.FixtureRequest, empty_store: Path) -> Iterator[Node]:
    """The plugin on a power-cut filesystem (durability from the test's parameter), its disk
    holding a new empty store (made off the mount: creating its shards' logs through a
    filesystem in Python takes most of a minute, and no cut falls before the first boot);
    whatever the test's outcome, its processes die and the mount goes at teardown."""
    copy_of(empty_store, tmp_path / "disk" / "data")
    mount = PowerCutMount(tmp_path / "disk", tmp_path / "mnt", tmp_path / "fs.log")
    node = Node(mount, tmp_path, request.param)
    yield node
    node.power_cut()


async def health(session: aiohttp.ClientSession, server: ServerProcess) -> str:
    async with session.get(f"{server.base_url}/v1/health") as response:
        return str((await response.json())["status"])


async def refilled(session: aiohttp.ClientSession, server: ServerProcess) -> float:
    """How many memories the token fill had to give token vectors and wordpieces after the
    boot: none, when every acknowledged write's wordpieces (the rerank's document
    frequencies) survived with it. Waits for the fill's pass (health's `rerank_weights`)."""
    await asyncio.to_thread(server.wait_weighed, 60)
    async with session.get(f"{server.base_url}/metrics") as response:
        text = await response.text()
    counts = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("memory_plugin_token_vectors_indexed_total ")
    ]
    return sum(counts)


async def checked(session: aiohttp.ClientSession, server: ServerProcess, writers: list[Writer]):
    wrong = [line for writer in writers for line in await check(session, server.base_url, writer)]
    if lost := await refilled(session, server):
        wrong.append(f"{lost:g} memories came back without their wordpieces")
    return wrong, await health(session, server)


async def run_and_cut(
    session: aiohttp.ClientSession, node: Node, writers: list[Writer], after_s: float
) -> None:
    server = node.server
    assert server is not None
    tasks = [asyncio.create_task(w.run(session, server.base_url)) for w in writers]
    await asyncio.sleep(after_s)
    stopped = [w.stopped_by for w, task in zip(writers, tasks, strict=True) if task.done()]
    await asyncio.to_thread(node.power_cut)
    await asyncio.gather(*tasks)
    assert not stopped, f"a write failed before the power cut: {stopped}\n{server.log_tail()}"


@pytest.mark.parametrize("node", ["sync"], indirect=True)
async def test_every_acknowledged_write_survives_every_power_cut(node: Node) -> None:
    rng = random.Random(SEED)
    writers = [Writer(n, names=2, seed=SEED * 100 + n) for n in range(WRITERS)]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        for cut in range(CUTS):
            server = await asyncio.to_thread(node.power_on)
            if cut == 0:
                await asyncio.gather(*(w.create_all(session, server.base_url) for w in writers))
            wrong, status = await checked(session, server, writers)
            assert not wrong, f"after cut {cut}:\n" + "\n".join(wrong)
            assert status == "ok", server.log_tail()
            await run_and_cut(session, node, writers, rng.uniform(0.2, 2.5))
        server = await asyncio.to_thread(node.power_on)
        wrong, status = await checked(session, server, writers)
        assert not wrong, f"after cut {CUTS}:\n" + "\n".join(wrong)
        assert status == "ok", server.log_tail()
        await asyncio.to_thread(node.shut_down)
    written = {kind: sum(w.counts.get(kind, 0) for w in writers) for kind in KINDS}
    assert all(written.values()), written  # every kind of write was cut across
    data_dir = node.mount.backing / "data"
    result, _ = run_cli(["verify-store"], {"MEMORY_PLUGIN_DATA_DIR": str(data_dir)})
    assert result.returncode == 0, result.stdout + result.stderr


KINDS = ("create", "commit", "forget", "patch", "delete")


@pytest.mark.parametrize("node", ["async"], indirect=True)
async def test_under_async_the_same_cut_loses_acknowledged_writes(node: Node) -> None:
    # A cut just after the store's own periodic sync may find nothing unsynced to
    # lose: cut again, up to a few times, until one loses an acknowledged write.
    writers = [Writer(n, names=1, seed=SEED + n) for n in range(2)]
    wrong: list[str] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        server = await asyncio.to_thread(node.power_on)
        await asyncio.gather(*(w.create_all(session, server.base_url) for w in writers))
        for _ in range(ASYNC_CUTS):
            await run_and_cut(session, node, writers, 1.5)
            server = await asyncio.to_thread(node.power_on)
            wrong, _ = await checked(session, server, writers)
            if wrong:
                break
        await asyncio.to_thread(node.shut_down)
    assert wrong  # what `sync` exists to prevent


ASYNC_CUTS = 4
