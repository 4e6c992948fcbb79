"""The engine worker is a fault domain: killed or hung, it is replaced, and nothing
acknowledged is lost; meanwhile its namespaces wait for it a moment, then answer 503
`unavailable`, never a hang."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from adapters.pool.embedded_store import edge_worker
from adapters.pool.embedded_store import embedded_store
from adapters.pool.engine_pool import EnginePool
from adapters.values import NamespaceRecord
from harness.server_process import ServerProcess
from tests.support.app import ContractClient
from tests.support.app import backend_of
from tests.support.records import DIM
from tests.support.records import T0
from tests.worker.test_engine_process import until

WRITERS = 8
SEARCHERS = 8
KILLS = 10


async def serving_again(api: ContractClient, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while (await api.call("GET", "/v1/health", check=False)).status != 200:
        assert time.monotonic() < deadline, "the engine worker did not come back"
        await asyncio.sleep(0.05)


async def acknowledged_more(
    acknowledged: dict[str, list[str]],
    count: int,
    load: list[asyncio.Task[None]],
    within_s: float = 60.0,
) -> None:
    """Until `count` more writes were acknowledged by the `load` running meanwhile; a load
    task that stopped raises its own error here rather than leaving the wait to hang."""
    wanted = sum(map(len, acknowledged.values())) + count
    deadline = time.monotonic() + within_s
    while sum(map(len, acknowledged.values())) < wanted:  # the writers append meanwhile
        for task in load:
            if task.done():
                task.result()
        assert time.monotonic() < deadline, f"fewer than {count} writes acknowledged"
        await asyncio.sleep(0.01)


async def test_a_killed_worker_loses_nothing_acknowledged(api: ContractClient) -> None:
    writers = [f"workspace:writer-{n}" for n in range(WRITERS)]
    for name in writers:
        assert (await api.put_ns(name)).status == 200
    acknowledged: dict[str, list[str]] = {name: [] for name in writers}
    statuses: Counter[int] = Counter()
    done = asyncio.Event()

    async def write(name: str) -> None:
        n = 0
        while not done.is_set():
            n += 1
            reply = await api.commit(name, f"{name} remembers fact number {n}", check=False)
            statuses[reply.status] += 1
            if reply.status == 201:
                acknowledged[name].append(reply.body["id"])
            else:  # 429: over capacity on a slow machine, its deadline passed in a queue
                assert reply.status in (429, 503), reply
                assert reply.body["code"] == "unavailable"
                await asyncio.sleep(0.01)

    async def search(name: str) -> None:
        while not done.is_set():
            reply = await api.search(name, query="which fact", limit=5, check=False)
            statuses[reply.status] += 1
            assert reply.status in (200, 429, 503), reply
            if reply.status != 200:
                assert reply.body["code"] == "unavailable"
                await asyncio.sleep(0.01)

    load = [asyncio.create_task(write(name)) for name in writers]
    load += [asyncio.create_task(search(writers[n % WRITERS])) for n in range(SEARCHERS)]
    worker = backend_of(api, EnginePool).workers[0]
    for _ in range(KILLS):
        await serving_again(api)
        await acknowledged_more(acknowledged, 5, load)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
    await serving_again(api)
    done.set()
    await asyncio.gather(*load)

    assert worker.restarts >= KILLS
    assert statuses[201] > 0, statuses
    assert statuses[200] > 0, statuses
    store = backend_of(api, EnginePool)
    for name, ids in acknowledged.items():
        found = await store.get_namespaces([name])
        assert name in found
        for memory_id in ids:
            assert await store.get_memory(name, memory_id) is not None, (name, memory_id)


async def test_while_the_worker_is_down_health_and_requests_say_so(api: ContractClient) -> None:
    """Down past the moment a call waits for its replacement (the spare stopped)."""
    assert (await api.put_ns("workspace:a")).status == 200
    worker = backend_of(api, EnginePool).workers[0]
    await until(lambda: worker.spare_pid is not None, 30)
    spare = worker.spare_pid
    assert worker.pid is not None
    assert spare is not None
    os.kill(spare, signal.SIGSTOP)
    os.kill(worker.pid, signal.SIGKILL)
    health, listing = await asyncio.gather(  # no model call: both reach the store at once
        api.call("GET", "/v1/health", check=False), api.search("workspace:a", check=False)
    )
    os.kill(spare, signal.SIGCONT)
    await serving_again(api)
    assert health.status == 503
    assert health.body["status"] == "degraded"
    assert health.body["code"] == "unavailable"
    assert "restart" in health.body["message"]
    assert listing.status == 503
    assert listing.body == {"code": "unavailable", "message": listing.body["message"]}
    assert "restart" in listing.body["message"]
    assert (await api.commit("workspace:a", "a fact")).status == 201


@pytest.mark.settings(backend_timeout_s=5.0)
async def test_a_hung_worker_is_killed_and_restarted(api: ContractClient) -> None:
    assert (await api.put_ns("workspace:a")).status == 200
    worker = backend_of(api, EnginePool).workers[0]
    worker.hang_s = 0.5
    pid = worker.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # alive, answering nothing
    started = time.monotonic()
    await serving_again(api)
    assert worker.pid != pid
    assert time.monotonic() - started < 5.0
    reply = await api.commit("workspace:a", "after the hang")
    assert reply.status == 201


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # a zombie holds no files: it waits only to be collected


@pytest.mark.slow
def test_the_worker_dies_with_the_server(tmp_path: Path) -> None:
    """A worker left behind would hold the store when the next server's worker opens it
    (its spare too: it would open it when told)."""
    with ServerProcess(tmp_path / "data", tmp_path / "server.log") as server:
        server.start()
        server.wait_healthy()
        deadline = time.monotonic() + 30.0
        while len(children := server.children()) < 2:  # the worker and its spare
            assert time.monotonic() < deadline, "no spare stood by"
            time.sleep(0.01)
        (worker,) = server.workers()
        os.kill(worker, signal.SIGSTOP)  # it cannot notice the server is gone: killed anyway
        server.kill()
        deadline = time.monotonic() + 5.0
        while not all(gone(child) for child in children):
            assert time.monotonic() < deadline, "a worker outlived the server"
            time.sleep(0.01)


def test_a_worker_killed_by_a_fatal_signal_leaves_every_threads_stack(tmp_path: Path) -> None:
    """A SIGBUS from a mapped file or a segfault in the engine: the worker's last words are
    its threads' Python stacks, on the stderr it shares with the server (the server's log)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = subprocess.Popen(
            [
                *(sys.executable, "-I", "-m", "adapters.engine.engine_worker"),
                *("--fd", str(theirs.fileno()), "--server-pid", str(os.getpid())),
                *edge_worker(DIM, tmp_path).spec.argv(),  # the server's own arguments
            ],
            pass_fds=(theirs.fileno(),),
            stderr=subprocess.PIPE,
        )
        ours.settimeout(60)
        assert ours.recv(1)  # its first message: it is running, past its start
        worker.send_signal(signal.SIGBUS)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == -signal.SIGBUS
    text = stderr.decode()
    assert "Fatal Python error: Bus error" in text
    assert "adapters/engine/engine_worker.py" in text


async def test_one_process_opens_a_store_at_a_time(tmp_path: Path) -> None:
    """A second store on the same data directory waits until the first has closed it."""
    async with asyncio.timeout(60):  # a wait that never ends fails here, not in CI's limit
        first = embedded_store(DIM, tmp_path, 1)
        await first.start()
        await first.save_namespace(NamespaceRecord(name="org:a", kind="org", created_at=T0))
        second = embedded_store(DIM, tmp_path, 1)
        opening = asyncio.create_task(second.start())
        await asyncio.sleep(1.0)
        assert not opening.done()  # held by the first
        await first.close()
        await opening
        try:
            assert await second.get_namespace("org:a") is not None
        finally:
            await second.close()
