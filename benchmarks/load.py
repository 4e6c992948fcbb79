"""Closed-loop HTTP load against a server process, and its figures, for benchmarks/namespaces.py.

A phase is one kind of request sent by CALLERS callers for a duration (or a work
list sent once); it records each latency and each status, and prints as one line.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.common import percentile
from benchmarks.sentences import queries
from benchmarks.sentences import sentences
from harness.server_process import ServerProcess

CALLERS = 8
KINDS = ("workspace", "team", "org")
HOT_SET = 30
SEARCH_NAMESPACES = 3
SEARCH_LIMIT = 10
SLOW_P99_MS = 300.0

MAX_CALLS = 200_000  # per closed-loop phase, on top of its duration
WORK_LIST_BUDGET_S = 600.0
TIMEOUT = aiohttp.ClientTimeout(total=10)
Request = tuple[str, str, Any]  # method, url, JSON body

# -- figures ---------------------------------------------------------------------------


@dataclass
class Phase:
    """Client-side latencies and unexpected statuses of one kind of request."""

    name: str
    expect: int
    latencies: list[float] = field(default_factory=list)
    bad: Counter[int] = field(default_factory=Counter)
    first_reply: dict[int, str] = field(default_factory=dict)
    elapsed: float = 0.0
    client_lag: float = 0.0  # worst delay of the client's own event loop meanwhile

    def record(self, status: int, took: float, reply: bytes) -> None:
        self.latencies.append(took)
        if status != self.expect:
            self.bad[status] += 1
            self.first_reply.setdefault(status, reply[:200].decode(errors="replace"))

    @property
    def ok(self) -> int:
        return len(self.latencies) - sum(self.bad.values())

    @property
    def rate(self) -> float:
        return self.ok / self.elapsed if self.elapsed else 0.0

    def ms(self, pct: float) -> float:
        return percentile(self.latencies, pct) * 1000 if self.latencies else float("nan")


def print_phases(phases: Sequence[Phase]) -> None:
    print(
        f"  {'phase':<36} {'calls':>6} {'ok/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'max ms':>7} {'5xx':>5} {'cl.lag':>6}  other non-2xx"
    )
    for p in phases:
        server_errors = sum(n for status, n in p.bad.items() if status >= 500)
        other = ", ".join(f"{s}x{n}" for s, n in sorted(p.bad.items()) if s < 500) or "-"
        print(
            f"  {p.name:<36} {len(p.latencies):>6} {p.rate:>7.1f} {p.ms(50):>7.1f} "
            f"{p.ms(99):>7.1f} {p.ms(100):>7.1f} {server_errors:>5} "
            f"{p.client_lag * 1000:>6.0f}  {other}"
        )
    for p in phases:
        for status, count in sorted(p.bad.items()):
            print(f"    {p.name}: {count} x {status}, first reply: {p.first_reply[status]!r}")


def slow_p99(phases: Sequence[Phase]) -> str:
    slow = [f"{p.name} ({p.ms(99):.0f} ms)" for p in phases if p.ms(99) > SLOW_P99_MS]
    return "; ".join(slow) if slow else "none"


def server_rss(server: ServerProcess) -> str:
    """VmRSS and VmHWM (peak) of the server and its engine workers together, each's
    VmRSS, and how much of the total is anonymous memory (the rest is pages of the
    store's mapped files: page cache, reclaimable)."""
    if server.proc is None:
        return "n/a"
    try:
        each = [_memory(pid) for pid in [server.proc.pid, *server.children()]]
    except OSError:
        return "n/a (process gone)"
    rss, peak, anon = (sum(found.get(k, 0.0) for found in each) for k in _MEMORY)
    parts = " + ".join(f"{found.get('VmRSS', 0.0):,.0f}" for found in each)
    return (
        f"{rss:,.0f} MiB (server + workers: {parts}; peaks summed {peak:,.0f} MiB; "
        f"anonymous {anon:,.0f} MiB)"
    )


_MEMORY = ("VmRSS", "VmHWM", "RssAnon")


def _memory(pid: int) -> dict[str, float]:
    """A process's `_MEMORY` lines from /proc, in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in _MEMORY:
            found[key] = int(value.split()[0]) / 1024
    return found


class LoopLag:
    """Ticks every 10 ms on the client's loop and keeps the worst late wake-up: a large
    one means the client (or the whole machine) stalled, not only the server."""

    TICK_S = 0.01

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.TICK_S)
            self.worst = max(self.worst, time.perf_counter() - before - self.TICK_S)

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


# -- HTTP ------------------------------------------------------------------------------


async def send(session: aiohttp.ClientSession, request: Request) -> tuple[int, float, bytes]:
    method, url, body = request
    started = time.perf_counter()
    try:
        async with session.request(method, url, json=body) as response:
            reply = await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as error:
        status, reply = 0, repr(error).encode()
    return status, time.perf_counter() - started, reply


async def work_list(session: aiohttp.ClientSession, phase: Phase, work: list[Request]) -> None:
    """Send every request once, CALLERS at a time."""
    pending = iter(work)
    deadline = time.perf_counter() + WORK_LIST_BUDGET_S

    async def caller() -> None:
        for request in pending:  # shared iterator: each request is sent by one caller
            if time.perf_counter() > deadline:
                return
            phase.record(*await send(session, request))

    started = time.perf_counter()
    async with LoopLag() as lag:
        await asyncio.gather(*(caller() for _ in range(CALLERS)))
    phase.elapsed = time.perf_counter() - started
    phase.client_lag = lag.worst


async def closed_loop(
    session: aiohttp.ClientSession,
    phases: Sequence[Phase],
    duration: float,
    make: Callable[[random.Random], tuple[Phase, Request]],
    seed: int,
) -> None:
    """CALLERS callers, each sending its next request when the last one answered."""
    issued = itertools.count()
    deadline = time.perf_counter() + duration

    async def caller(rng: random.Random) -> None:
        while time.perf_counter() < deadline and next(issued) < MAX_CALLS:
            phase, request = make(rng)
            phase.record(*await send(session, request))

    started = time.perf_counter()
    async with LoopLag() as lag:
        await asyncio.gather(*(caller(random.Random(seed * 1000 + k)) for k in range(CALLERS)))
    for phase in phases:
        phase.elapsed = time.perf_counter() - started
        phase.client_lag = lag.worst


class Traffic:
    """Request bodies: commits of varied sentences, 3-namespace semantic searches."""

    def __init__(self, base: str, seed: int) -> None:
        self.base = base
        self.texts = sentences(5_000, seed=seed)
        self.queries = queries(500, seed=seed + 1)
        self._next_text = itertools.count()

    def commit(self, name: str, rng: random.Random) -> Request:
        body = {
            "content": self.texts[next(self._next_text) % len(self.texts)],
            "kind": "fact",
            "source": "agent",
            "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        return "POST", f"{self.base}/v1/namespaces/{name}/memories", body

    def search(self, names: Sequence[str], rng: random.Random) -> Request:
        body = {
            "namespaces": rng.sample(names, SEARCH_NAMESPACES),
            "query": rng.choice(self.queries),
            "limit": SEARCH_LIMIT,
        }
        return "POST", f"{self.base}/v1/search", body

    async def warm_up(self, session: aiohttp.ClientSession, names: Sequence[str]) -> None:
        """One commit and one search, not counted (the first model call is slower)."""
        rng = random.Random(0)
        for request in (self.commit(names[0], rng), self.search(names, rng)):
            status, _, reply = await send(session, request)
            if status not in (200, 201):
                print(f"  warm-up {request[0]} {request[1]} answered {status}: {reply[:200]!r}")


def namespace_names(count: int, seed: int) -> list[str]:
    """workspace:, team:, org: names in a 1:1:1 mix, each with a (seeded) UUID."""
    rng = random.Random(seed)
    return [
        f"{KINDS[i % 3]}:{uuid.UUID(int=rng.getrandbits(128), version=4)}" for i in range(count)
    ]
