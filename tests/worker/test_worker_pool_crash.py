"""With several engine workers, a worker killed under load takes only its own namespaces
away: theirs answer 503 `unavailable` until it is back, the other worker's never fail,
health says `degraded`, and nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter

import pytest

from adapters.pool.engine_pool import EnginePool
from tests.support.app import ContractClient
from tests.support.app import backend_of
from tests.support.backends import names_of_each_worker
from tests.worker.test_worker_crash import acknowledged_more
from tests.worker.test_worker_crash import serving_again

WRITERS_PER_WORKER = 4
KILLS = 5


async def all_serving(api: ContractClient, within_s: float = 30.0) -> None:
    """Until health says `ok`: every worker up again."""
    deadline = time.monotonic() + within_s
    while (await api.call("GET", "/v1/health", check=False)).body.get("status") != "ok":
        assert time.monotonic() < deadline, "the engine worker did not come back"
        await asyncio.sleep(0.05)


# A deadline well past the kills' restarts: on a machine short of CPU a request may run out
# of a 1.5 s deadline whatever the workers do, and this test is about what a crash fails.
@pytest.mark.settings(engine_workers=2, backend_timeout_s=10.0)
async def test_a_killed_worker_fails_only_its_own_namespaces(api: ContractClient) -> None:
    store = backend_of(api, EnginePool)
    names = names_of_each_worker(store, WRITERS_PER_WORKER)
    for name in names[0] + names[1]:
        assert (await api.put_ns(name)).status == 200
    acknowledged: dict[str, list[str]] = {name: [] for name in names[0] + names[1]}
    statuses: list[Counter[int]] = [Counter(), Counter()]
    failures: list[list[str]] = [[], []]  # each refusal's message, for the assertions' report
    done = asyncio.Event()

    async def write(worker: int, name: str) -> None:
        n = 0
        while not done.is_set():
            n += 1
            reply = await api.commit(name, f"{name} remembers fact number {n}", check=False)
            statuses[worker][reply.status] += 1
            if reply.status == 201:
                acknowledged[name].append(reply.body["id"])
            else:
                assert reply.body["code"] == "unavailable", reply
                failures[worker].append(f"{reply.status} {reply.body['message']}")
                await asyncio.sleep(0.01)

    async def search(worker: int, name: str) -> None:
        while not done.is_set():
            reply = await api.search(name, query="which fact", limit=5, check=False)
            statuses[worker][reply.status] += 1
            if reply.status != 200:
                assert reply.body["code"] == "unavailable", reply
                failures[worker].append(f"{reply.status} {reply.body['message']}")
                await asyncio.sleep(0.01)

    load = [
        asyncio.create_task(task(worker, name))
        for worker in (0, 1)
        for name in names[worker]
        for task in (write, search)
    ]
    killed = store.workers[0]
    for _ in range(KILLS):
        await serving_again(api)
        await acknowledged_more(acknowledged, 5, load)
        assert killed.pid is not None
        os.kill(killed.pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        health = await api.call("GET", "/v1/health", check=False)
        if not killed.up:  # not back yet: the store serves, degraded
            assert health.body["status"] == "degraded", health
    await all_serving(api)  # health answers 200 `degraded` while worker 0 restarts
    done.set()
    await asyncio.gather(*load)

    assert killed.restarts >= KILLS
    assert store.workers[1].restarts == 0
    assert statuses[0][201] > 0, statuses  # its namespaces wait for the replacement
    assert statuses[1][503] == 0, failures[1]  # never failed by the other worker's crash
    assert statuses[1][201] > 0, statuses
    assert statuses[1][200] > 0, statuses
    for name, ids in acknowledged.items():
        for memory_id in ids:
            assert await store.get_memory(name, memory_id) is not None, (name, memory_id)
