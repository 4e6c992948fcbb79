"""Thousands of namespaces on the real server (embedded qdrant-edge, 16 hashed shards).

With a shard per namespace, throughput collapsed past 64 namespaces (commits
123/s at 50 namespaces, 7/s at 1000, 12-26% answered 503). Every namespace is
now a tenant partition of one of 16 shards (by a hash of its name); this shows
how the server holds up.

1. The model alone, in this process, before any server runs: load time,
   sentences/s in batches of 8 (median of 40 batches) and single-sentence
   latency; it also embeds a few thousand distinct sentences for step 3, then
   the model is freed.
2. For each N of `--namespaces`: a fresh server on an empty data dir; N
   namespace PUTs (8 concurrent callers, workspace:/team:/org: names 1:1:1),
   then the same PUTs again (unchanged); commits for `--duration` s (8 callers,
   closed loop) to random namespaces among all N, then among 30 of them; 3-
   namespace semantic searches (limit 10) for `--duration` s; server RSS.
3. Store scale: a data dir of `--store-namespaces` namespaces x `--per-namespace`
   memories built offline through `QdrantEdgeBackend` (vectors are real
   embeddings from step 1, reused across memories), then the store's own
   start-up, the server's spawn -> first healthy answer (twice), and `--mixed` s of
   mixed load (8 callers, half commits, half 3-namespace searches).

Client and server share the machine (the client's CPU is not free). Figures
only, nothing is asserted. Server answers other than the expected status are
counted per status (0 = transport error or client timeout, 10 s). `cl.lag` is
the worst late wake-up of the client's own event loop during a phase: a large
one means the client or the whole machine stalled, not only the server.

Run: python -m benchmarks.namespaces [--namespaces 1000,10000 --duration 20]
     (about 4-5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import random
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from adapters.base import MemoryRecord, NamespaceRecord
from adapters.qdrant.edge import QdrantEdgeBackend
from benchmarks.common import machine, percentile
from benchmarks.sentences import queries, sentences
from plugin.embedding.encoders import SentenceTransformerEncoder
from tests.support.server_process import ServerProcess

CALLERS = 8
KINDS = ("workspace", "team", "org")
HOT_SET = 30
SEARCH_NAMESPACES = 3
SEARCH_LIMIT = 10
SLOW_P99_MS = 300.0
BATCH = 8
BATCHES = 40
SINGLES = 100
DISTINCT = 3_000  # distinct sentences embedded for the store-scale preload
EMBED_CHUNK = BATCH  # the model's best rate here (batches of 64 were slower)
PRELOAD_TASKS = 4  # the backend's own worker threads
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
    """VmRSS and VmHWM (peak) of the server process, and how much of VmRSS is anonymous
    memory (the rest is pages of the store's mapped files: page cache, reclaimable)."""
    if server.proc is None:
        return "n/a"
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon"):
                found[key] = int(value.split()[0]) / 1024
    except OSError:
        return "n/a (process gone)"
    rss, peak, anon = (found.get(k, 0) for k in ("VmRSS", "VmHWM", "RssAnon"))
    return f"{rss:,.0f} MiB (peak {peak:,.0f} MiB; anonymous {anon:,.0f} MiB)"


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


# -- 1. the model alone ----------------------------------------------------------------


@dataclass
class Model:
    load_s: float
    batch_rate: float  # sentences/s, median over batches of BATCH
    batch_rates: list[float]
    single_s: list[float]
    embed_s: float
    texts: list[str]
    vectors: list[list[float]]


def measure_model(distinct: int) -> Model:
    started = time.perf_counter()
    encoder = SentenceTransformerEncoder.load()
    load_s = time.perf_counter() - started
    probe = sentences(BATCH * (BATCHES + 1) + SINGLES, seed=21)
    for _ in range(3):  # warm-up
        encoder.encode(probe[:BATCH])
    rates = []
    for b in range(1, BATCHES + 1):
        batch = probe[b * BATCH : (b + 1) * BATCH]
        started = time.perf_counter()
        encoder.encode(batch)
        rates.append(len(batch) / (time.perf_counter() - started))
    single = []
    for text in probe[BATCH * (BATCHES + 1) :]:
        started = time.perf_counter()
        encoder.encode([text])
        single.append(time.perf_counter() - started)
    texts = sentences(distinct, seed=7) if distinct else []
    started = time.perf_counter()
    vectors: list[list[float]] = []
    for first in range(0, len(texts), EMBED_CHUNK):
        vectors.extend(encoder.encode(texts[first : first + EMBED_CHUNK]))
    embed_s = time.perf_counter() - started
    del encoder
    gc.collect()
    return Model(load_s, statistics.median(rates), rates, single, embed_s, texts, vectors)


def print_model(model: Model) -> None:
    single_ms = [s * 1000 for s in model.single_s]
    print(
        f"model (all-MiniLM-L6-v2, in this process, no server running): "
        f"load {model.load_s:.1f} s (imports included)\n"
        f"  batches of {BATCH}: median {model.batch_rate:.0f} sentences/s "
        f"(min {min(model.batch_rates):.0f}, max {max(model.batch_rates):.0f}, "
        f"{BATCHES} batches)\n"
        f"  one sentence: median {statistics.median(single_ms):.1f} ms, "
        f"p99 {percentile(single_ms, 99):.1f} ms ({len(single_ms)} calls)"
    )
    if model.texts:
        print(
            f"  embedded {len(model.texts):,} distinct sentences for the store-scale "
            f"preload in {model.embed_s:.1f} s (chunks of {EMBED_CHUNK}); model freed"
        )


# -- 2. N namespaces on a fresh server -------------------------------------------------


async def measure_namespaces(
    server: ServerProcess, count: int, duration: float, seed: int
) -> list[Phase]:
    base = server.base_url
    names = namespace_names(count, seed)
    hot = names[:HOT_SET]
    traffic = Traffic(base, seed)
    put_new = Phase("PUT namespace (new)", 200)
    put_same = Phase("PUT namespace (unchanged)", 200)
    commit_all = Phase(f"commit, random of all {count:,}", 201)
    commit_hot = Phase(f"commit, random of {HOT_SET}", 201)
    search = Phase(f"search {SEARCH_NAMESPACES} random ns, limit {SEARCH_LIMIT}", 200)
    puts: list[Request] = [
        ("PUT", f"{base}/v1/namespaces/{name}", {"kind": name.split(":", 1)[0]}) for name in names
    ]
    connector = aiohttp.TCPConnector(limit=CALLERS * 2)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        await work_list(session, put_new, puts)
        await work_list(session, put_same, puts)
        await traffic.warm_up(session, names)
        await closed_loop(
            session,
            [commit_all],
            duration,
            lambda rng: (commit_all, traffic.commit(rng.choice(names), rng)),
            seed + 1,
        )
        await closed_loop(
            session,
            [commit_hot],
            duration,
            lambda rng: (commit_hot, traffic.commit(rng.choice(hot), rng)),
            seed + 2,
        )
        await closed_loop(
            session,
            [search],
            duration,
            lambda rng: (search, traffic.search(names, rng)),
            seed + 3,
        )
    return [put_new, put_same, commit_all, commit_hot, search]


def run_scale(count: int, duration: float, model: Model, seed: int) -> float:
    """One fresh server with `count` namespaces; prints its table, returns its cold start."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-ns-") as tmp,
        ServerProcess(Path(tmp) / "data", Path(tmp) / "server.log") as server,
    ):
        server.start()
        cold = server.wait_healthy()
        at_start = server_rss(server)
        try:
            phases = asyncio.run(measure_namespaces(server, count, duration, seed))
        except BaseException:
            print("server log tail:\n" + server.log_tail())
            raise
        after = server_rss(server)
        code = server.terminate()
        print()
        print(
            f"N = {count:,} namespaces: fresh server, cold start {cold:.2f} s; "
            f"server RSS {at_start} at start, {after} after the phases"
        )
        print_phases(phases)
        _, _, commit_all, commit_hot, search = phases
        print(
            f"  ratios: commits all/{HOT_SET} = {commit_all.rate / commit_hot.rate:.2f}; "
            f"commits all / model batch-{BATCH} = {commit_all.rate / model.batch_rate:.2f}; "
            f"searches / model batch-{BATCH} = {search.rate / model.batch_rate:.2f}"
        )
        print(f"  p99 > {SLOW_P99_MS:.0f} ms: {slow_p99(phases)}; SIGTERM exit code {code}")
        if code != 0 or any(p.bad for p in phases):
            print("  server log tail:\n" + server.log_tail(2000))
        return cold


# -- 3. store scale --------------------------------------------------------------------


async def build_store(data: Path, names: list[str], per_namespace: int, model: Model) -> None:
    """Namespaces and memories written offline through the backend's public methods."""
    backend = QdrantEdgeBackend(len(model.vectors[0]), data)
    await backend.start()
    try:
        now = datetime.now(UTC)
        started = time.perf_counter()
        for name in names:
            await backend.save_namespace(NamespaceRecord(name, name.split(":", 1)[0], now))
        saved_s = time.perf_counter() - started
        total = len(names) * per_namespace
        oldest = now - timedelta(seconds=total)
        rng = random.Random(5)
        pending = iter(range(total))

        async def writer() -> None:
            for i in pending:  # shared: memory i goes to namespace i % len(names)
                memory = MemoryRecord(
                    id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    namespace=names[i % len(names)],
                    content=model.texts[i % len(model.texts)],
                    kind="fact",
                    source="agent",
                    created_at=oldest + timedelta(seconds=i),
                )
                await backend.upsert_memory(memory, model.vectors[i % len(model.vectors)])

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(PRELOAD_TASKS)))
        took = time.perf_counter() - started
        print(
            f"preload (offline, in-process QdrantEdgeBackend): {len(names):,} namespace records "
            f"in {saved_s:.1f} s; {total:,} memories via upsert_memory ({PRELOAD_TASKS} "
            f"concurrent tasks) in {took:.1f} s ({total / took:,.0f}/s)\n"
            f"  vectors: real embeddings of {len(model.vectors):,} distinct sentences, each "
            f"reused by ~{total // len(model.vectors)} memories (content = its sentence)"
        )
    finally:
        await backend.close()


async def store_start(data: Path, dimension: int) -> tuple[float, int]:
    backend = QdrantEdgeBackend(dimension, data)
    started = time.perf_counter()
    await backend.start()
    took = time.perf_counter() - started
    try:
        return took, len(await backend.list_namespaces())
    finally:
        await backend.close()


async def mixed_load(server: ServerProcess, names: list[str], duration: float) -> list[Phase]:
    traffic = Traffic(server.base_url, seed=77)
    commit = Phase("commit, random of all", 201)
    search = Phase(f"search {SEARCH_NAMESPACES} random ns, limit {SEARCH_LIMIT}", 200)

    def make(rng: random.Random) -> tuple[Phase, Request]:
        if rng.random() < 0.5:
            return commit, traffic.commit(rng.choice(names), rng)
        return search, traffic.search(names, rng)

    connector = aiohttp.TCPConnector(limit=CALLERS * 2)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        await traffic.warm_up(session, names)
        await closed_loop(session, [commit, search], duration, make, seed=78)
    return [commit, search]


def run_store_scale(args: argparse.Namespace, model: Model, empty_cold: list[float]) -> None:
    names = namespace_names(args.store_namespaces, seed=1234)
    total = len(names) * args.per_namespace
    print()
    print(
        f"store scale: {len(names):,} namespaces x {args.per_namespace} = {total:,} memories "
        f"(goals: server RSS < 1.5 GB, start-up < 2 s beyond loading the model)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        data = Path(tmp) / "data"
        asyncio.run(build_store(data, names, args.per_namespace, model))
        start_s, loaded = asyncio.run(store_start(data, len(model.vectors[0])))
        print(f"  QdrantEdgeBackend.start() on it, in-process: {start_s:.2f} s ({loaded:,} ns)")
        with ServerProcess(data, Path(tmp) / "server.log") as server:
            server.start()
            first = server.wait_healthy()
            first_exit = server.terminate()
            server.start()  # a second start, to see the spread; this one takes the load
            second = server.wait_healthy()
            print(
                f"  server spawn -> first healthy 200: {first:.2f} s, {second:.2f} s on a "
                f"restart (SIGTERM exit code {first_exit})"
            )
            if empty_cold:
                extra = min(first, second) - min(empty_cold)
                print(
                    f"    on an empty data dir (step 2): {min(empty_cold):.2f} s, so the store "
                    f"adds {extra:.2f} s"
                )
            print(
                f"    model load in-process (step 1): {model.load_s:.2f} s; spawn -> healthy "
                f"minus that: {min(first, second) - model.load_s:.2f} s (interpreter, imports, "
                "store)"
            )
            print(f"  server RSS after start: {server_rss(server)}")
            try:
                phases = asyncio.run(mixed_load(server, names, args.mixed))
            except BaseException:
                print("server log tail:\n" + server.log_tail())
                raise
            after = server_rss(server)
            code = server.terminate()
        print(f"  {args.mixed:g} s mixed load, {CALLERS} callers, half commits, half searches:")
        print_phases(phases)
        print(f"  server RSS after the mixed load: {after}")
        print(f"  p99 > {SLOW_P99_MS:.0f} ms: {slow_p99(phases)}; SIGTERM exit code {code}")
        if code != 0 or any(p.bad for p in phases):
            print("  server log tail:\n" + server.log_tail(2000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", default="1000,10000", help="comma-separated Ns")
    parser.add_argument("--duration", type=float, default=20.0, help="s per closed-loop phase")
    parser.add_argument("--store-namespaces", type=int, default=10_000, help="0 skips step 3")
    parser.add_argument("--per-namespace", type=int, default=20)
    parser.add_argument("--mixed", type=float, default=30.0, help="s of mixed load in step 3")
    args = parser.parse_args()
    counts = [int(n) for n in args.namespaces.split(",") if n.strip()]
    if any(n < HOT_SET for n in counts):
        parser.error(f"every N must be at least {HOT_SET}")

    print(f"namespaces.py: real server, embedded qdrant-edge, 16 hashed shards ({machine()})")
    started = time.perf_counter()
    model = measure_model(DISTINCT if args.store_namespaces else 0)
    print_model(model)
    empty_cold = [run_scale(n, args.duration, model, seed=100 + n) for n in counts]
    if args.store_namespaces:
        run_store_scale(args, model, empty_cold)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
