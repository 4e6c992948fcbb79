"""Search latency of one big namespace inside a big embedded store, adapter level.

The embedded store keeps every namespace as a tenant partition of one
qdrant-edge shard, and searches are exact (no HNSW), so a search costs time in
proportion to the namespaces it reads. This measures how much: it opens
`QdrantEdgeBackend(384, tmpdir)` in-process (no HTTP, no model), creates one
namespace of `--big` memories and spreads the rest of `--total` over namespaces
of `--small` memories each, writing them in a seeded random interleaving (as
writes arrive in life) with random unit vectors (numpy, seeded). Points are
written in big batches straight to the shard with exactly the payload and point
id `upsert_memory` writes (`memory_to_payload(memory, epoch)`, `point_id`), a
bulk-load shortcut; every read goes through the adapter.

Then it times, through the adapter's own async methods (thread pool included):
`query_memories` (limit 10) on the big namespace, on one small namespace, and on
the big one plus two small; `list_memories` (newest first, limit 100) on the big
and on a small one. Three rounds: right after the bulk load, after closing and
re-opening the store (timed: the store's start-up), and after `optimize()` (what
the janitor runs once 20,000 changes accumulated; timed). Process RSS is
printed along the way.

Run: python -m benchmarks.big_store [--total 1000000 --big 100000]
     (1M: about 3-4 minutes on 2 cores, peak RSS ~5 GB; --total 200000 for a quick look)
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable
from collections.abc import Callable
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from benchmarks.common import machine
from benchmarks.common import print_table
from benchmarks.common import summary_ms
from benchmarks.sentences import sentences

DIM = 384
BATCH = 2_000
SAMPLES = 200
WARMUP = 5
CONTENT_POOL = 5_000
BIG = "workspace:big"
# A bulk load that goes past this is stopped between batches (every loop is bounded).
LOAD_BUDGET_S = 900.0


def rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    found = {"VmRSS:": 0.0, "VmHWM:": 0.0}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(maxsplit=1)[0] if line else ""
        if key in found:
            found[key] = int(line.split()[1]) / 1024
    return found["VmRSS:"], found["VmHWM:"]


def rss_line(label: str) -> str:
    now, peak = rss_mib()
    return f"{label}: process RSS {now:,.0f} MiB (peak {peak:,.0f} MiB)"


def unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def layout(total: int, big: int, small: int) -> list[tuple[str, int]]:
    """(namespace, memories): the big one, then namespaces of `small` for the rest."""
    rest = total - big
    if big < 1 or small < 1 or rest < 2 * small:
        raise SystemExit("need --big >= 1 and --total >= --big + 2 * --small")
    sizes = [small] * (rest // small)
    sizes[-1] += rest % small
    return [(BIG, big)] + [(f"workspace:small-{i:05d}", n) for i, n in enumerate(sizes)]


async def bulk_load(
    backend: QdrantEdgeBackend, plan: list[tuple[str, int]], seed: int
) -> tuple[float, int]:
    """Create the namespaces and write every memory in BATCH-point updates; (seconds, points)."""
    now = datetime.now(UTC)
    for name, _ in plan:
        await backend.save_namespace(NamespaceRecord(name, "workspace", now))
    epochs = {name: backend.store.records.live[name].epoch for name, _ in plan}
    shard = backend._shard  # bulk-load shortcut, see the module docstring
    names = np.repeat(np.arange(len(plan)), [count for _, count in plan])
    rng = np.random.default_rng(seed)
    rng.shuffle(names)  # writes to all namespaces interleaved, as they arrive in life
    pool = sentences(CONTENT_POOL, seed=seed)
    total = len(names)
    oldest = now - timedelta(seconds=total)
    started = time.perf_counter()
    written = 0
    next_report = 0.25
    for first in range(0, total, BATCH):
        if time.perf_counter() - started > LOAD_BUDGET_S:
            print(f"  bulk load stopped after {LOAD_BUDGET_S:.0f} s at {written:,} points")
            break
        chunk = names[first : first + BATCH]
        vectors = unit_vectors(rng, len(chunk)).tolist()
        points = []
        for offset, (index, vector) in enumerate(zip(chunk.tolist(), vectors, strict=True)):
            name = plan[index][0]
            i = first + offset
            memory = MemoryRecord(
                id=str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | i, version=4)),
                namespace=name,
                content=pool[i % CONTENT_POOL],
                kind="fact",
                source="agent",
                created_at=oldest + timedelta(seconds=i),
            )
            points.append(
                qe.Point(point_id(name, memory.id), vector, memory_to_payload(memory, epochs[name]))
            )
        await backend._run(shard.update, qe.UpdateOperation.upsert_points(points))
        written += len(points)
        if written >= next_report * total:
            took = time.perf_counter() - started
            print(f"  {written:>9,} points  {took:6.1f} s  {written / took:>7,.0f}/s")
            next_report += 0.25
    return time.perf_counter() - started, written


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[list[float], int]:
    """WARMUP untimed calls, then SAMPLES timed ones; (durations, size of the last answer)."""
    for _ in range(WARMUP):
        await call()
    durations = []
    found: Any = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        found = await call()
        durations.append(time.perf_counter() - started)
    return durations, len(found)


async def measure_reads(
    backend: QdrantEdgeBackend, plan: list[tuple[str, int]], title: str, seed: int
) -> None:
    small_a, small_b = plan[1][0], plan[2][0]
    big_n, small_n = plan[0][1], plan[1][1]
    queries = unit_vectors(np.random.default_rng(seed + 1), SAMPLES + WARMUP).tolist()
    cursor = iter(range(10 * (SAMPLES + WARMUP)))  # bounded; one fresh vector per call

    def vector() -> list[float]:
        return queries[next(cursor) % len(queries)]

    def now() -> MemoryFilter:
        return MemoryFilter(now=datetime.now(UTC))

    def query(names: list[str]) -> Callable[[], Awaitable[Any]]:
        return lambda: backend.query_memories(names, SearchQuery(vector()), now(), 10)

    def listing(names: list[str]) -> Callable[[], Awaitable[Any]]:
        return lambda: backend.list_memories(names, now(), 100)

    operations = [
        (f"query 1 ns ({big_n:,}), limit 10", query([BIG])),
        (f"query 1 ns ({small_n:,}), limit 10", query([small_a])),
        ("query 3 ns (big + 2 small), lim 10", query([BIG, small_a, small_b])),
        (f"list 1 ns ({big_n:,}), limit 100", listing([BIG])),
        (f"list 1 ns ({small_n:,}), limit 100", listing([small_a])),
    ]
    rows = []
    for name, call in operations:
        durations, answered = await timed(call)
        label = name if answered else f"{name} [EMPTY]"
        rows.append((label, len(durations), summary_ms(durations)))
    print_table(title, rows)


def shard_info(backend: QdrantEdgeBackend) -> str:
    info = backend._shard.info()
    fields = []
    for attr in ("points_count", "segments_count", "indexed_vectors_count"):
        value = getattr(info, attr, None)
        if value is not None:
            fields.append(f"{attr}={value:,}")
    return ", ".join(fields) or repr(info)


def disk_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


async def run(args: argparse.Namespace) -> None:
    plan = layout(args.total, args.big, args.small)
    print(f"big_store.py: embedded qdrant-edge, adapter level, no HTTP ({machine()})")
    print(
        f"store: {args.total:,} memories (random unit vectors, {DIM} dims, seed {args.seed}); "
        f"1 namespace of {args.big:,} + {len(plan) - 1:,} of ~{args.small:,}; "
        f"writes interleaved, {BATCH:,} points per update"
    )
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        data = Path(tmp) / "data"
        backend = QdrantEdgeBackend(DIM, data)
        await backend.start()
        try:
            took, written = await bulk_load(backend, plan, args.seed)
            print(f"bulk load: {written:,} points in {took:.1f} s ({written / took:,.0f}/s)")
            print(rss_line("after bulk load") + f"; shard: {shard_info(backend)}")
            await measure_reads(backend, plan, "reads right after the bulk load:", args.seed)
        finally:
            started = time.perf_counter()
            await backend.close()
            print(f"close (flush): {time.perf_counter() - started:.2f} s")
        print(f"on disk: {disk_mib(data):,.0f} MiB")

        backend = QdrantEdgeBackend(DIM, data)
        started = time.perf_counter()
        await backend.start()
        print(f"re-open (QdrantEdgeBackend.start()): {time.perf_counter() - started:.2f} s")
        try:
            print(rss_line("after re-open") + f"; shard: {shard_info(backend)}")
            await measure_reads(backend, plan, "reads after re-opening the store:", args.seed)
            if args.optimize:
                before = shard_info(backend)
                started = time.perf_counter()
                await backend._run(backend._shard.optimize)
                took = time.perf_counter() - started
                print(f"optimize() (the janitor's, after 20k changes): {took:.1f} s")
                if shard_info(backend) == before:
                    print("  shard unchanged by optimize(); reads not repeated")
                else:
                    print(rss_line("after optimize") + f"; shard: {shard_info(backend)}")
                    await measure_reads(backend, plan, "reads after optimize():", args.seed)
        finally:
            await backend.close()
        shutil.rmtree(data, ignore_errors=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"CPU: {usage.ru_utime:.0f} s user, {usage.ru_stime:.0f} s system")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--total", type=int, default=1_000_000, help="memories in the store")
    parser.add_argument("--big", type=int, default=100_000, help="memories in the big namespace")
    parser.add_argument("--small", type=int, default=1_000, help="memories per other namespace")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--no-optimize", dest="optimize", action="store_false", help="skip the optimize() round"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
