"""100 commits sent at once to the real server (embedded default), three rounds.

The platform's client gives up after 2 s, and the server's own deadline is
1.5 s; this shows how long the slowest of 100 simultaneous writes waits (the
server batches concurrent texts into one model call; its batch counters are
not exposed over HTTP, so only client-side latencies are printed). Each write
has a distinct explicit id. Client and server share the machine.

Run: python -m benchmarks.parallel_writes   (under a minute on 2 cores)
"""

from __future__ import annotations

import asyncio
import time
import uuid

import aiohttp

from benchmarks.common import percentile
from benchmarks.common import run_against_server
from benchmarks.sentences import sentences
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess

NAMESPACE = "workspace:bench-parallel"
PARALLEL = 100
ROUNDS = 3


async def one_write(
    session: aiohttp.ClientSession, url: str, text: str, gate: asyncio.Event
) -> tuple[int, float]:
    body = {"id": str(uuid.uuid4()), "content": text, "kind": "fact", "source": "agent"}
    await gate.wait()
    started = time.perf_counter()
    try:
        async with session.post(url, json=body) as response:
            await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError):
        status = 0
    return status, time.perf_counter() - started


async def measure(server: ServerProcess) -> None:
    texts = sentences(PARALLEL * ROUNDS, seed=11)
    url = f"{server.base_url}/v1/namespaces/{NAMESPACE}/memories"
    connector = aiohttp.TCPConnector(limit=PARALLEL)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async with session.put(
            f"{server.base_url}/v1/namespaces/{NAMESPACE}", json={"kind": "workspace"}
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"PUT namespace answered {response.status}")
        # Warm up: one write, and open the connections the rounds will reuse.
        await asyncio.gather(*(_health(session, server.base_url) for _ in range(PARALLEL)))
        await one_write(session, url, "warm-up write", _open_gate())

        print(
            f"{'round':>5} {'ok':>4} {'min ms':>8} {'median ms':>10} {'max ms':>8} {'wall ms':>8}"
        )
        for n in range(ROUNDS):
            gate = asyncio.Event()
            batch = texts[n * PARALLEL : (n + 1) * PARALLEL]
            tasks = [asyncio.create_task(one_write(session, url, t, gate)) for t in batch]
            await asyncio.sleep(0.05)  # every task is parked at the gate
            started = time.perf_counter()
            gate.set()
            results = await asyncio.gather(*tasks)
            wall = time.perf_counter() - started
            ms = [d * 1000 for _, d in results]
            ok = sum(status == 201 for status, _ in results)
            print(
                f"{n + 1:>5} {ok:>4} {min(ms):>8.1f} {percentile(ms, 50):>10.1f} "
                f"{max(ms):>8.1f} {wall * 1000:>8.1f}"
            )
            others = sorted({status for status, _ in results if status != 201})
            if others:
                print(f"      non-201 statuses: {others} (0 = transport error)")
            await asyncio.sleep(0.5)


async def _health(session: aiohttp.ClientSession, base: str) -> None:
    async with session.get(f"{base}/v1/health") as response:
        await response.read()


def _open_gate() -> asyncio.Event:
    gate = asyncio.Event()
    gate.set()
    return gate


def main() -> None:
    run_against_server(
        f"parallel_writes.py: {PARALLEL} simultaneous commits x {ROUNDS} rounds",
        measure,
        WIDE_SHARES,  # one namespace, all at once: the batching is measured, not its share
    )


if __name__ == "__main__":
    main()
