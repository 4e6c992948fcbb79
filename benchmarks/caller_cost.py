"""The fairness benchmarks' load generator: its own CPU per request, aiohttp's client
against benchmarks/http_caller.py.

On a 2-core machine the load generator's CPU is taken from the server it measures,
and its own delays in reading answers are counted as the server's. Against the
real server process, 32 callers send health checks (4,000 in all) through each
client in turn, twice; printed: this process's user CPU per request, and requests
a second. About 30 seconds.
`python -m benchmarks.caller_cost`
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable
from collections.abc import Callable
from pathlib import Path

import aiohttp

from benchmarks.common import machine
from benchmarks.http_caller import Connection
from harness.server_process import ServerProcess

REQUESTS = 4000
CALLERS = 32


def user_cpu() -> float:
    return os.times().user


async def with_aiohttp(base: str) -> tuple[float, float]:
    timeout = aiohttp.ClientTimeout(total=2.0)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:

        async def caller(count: int) -> None:
            for _ in range(count):
                async with session.get(base + "/v1/health") as response:
                    await response.read()

        await asyncio.gather(*(caller(1) for _ in range(CALLERS)))  # connections open
        share = REQUESTS // CALLERS
        return await measured(lambda: asyncio.gather(*(caller(share) for _ in range(CALLERS))))


async def with_http_caller(base: str) -> tuple[float, float]:
    connections = [Connection(base) for _ in range(CALLERS)]

    async def caller(connection: Connection, count: int) -> None:
        for _ in range(count):
            await connection.send(("GET", "/v1/health", None))

    await asyncio.gather(*(caller(c, 1) for c in connections))  # connections open
    try:
        return await measured(
            lambda: asyncio.gather(*(caller(c, REQUESTS // CALLERS) for c in connections))
        )
    finally:
        for connection in connections:
            connection.close()


async def measured(run: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(user CPU seconds a request, requests a second)."""
    cpu, wall = user_cpu(), time.perf_counter()
    await run()
    return (user_cpu() - cpu) / REQUESTS, REQUESTS / (time.perf_counter() - wall)


def main() -> None:
    print(f"load generator cost ({machine()}): {CALLERS} callers, {REQUESTS:,} health checks")
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        ServerProcess(Path(tmp) / "data", Path(tmp) / "log", env={}, log_level="INFO") as server,
    ):
        server.start()
        server.wait_healthy()
        for _ in range(2):
            for name, client in (("aiohttp", with_aiohttp), ("http_caller", with_http_caller)):
                cpu, rate = asyncio.run(client(server.base_url))
                print(f"  {name}: {cpu * 1e6:.0f} us of user CPU a request; {rate:.0f} requests/s")


if __name__ == "__main__":
    main()
