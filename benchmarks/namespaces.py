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
   embeddings from step 1, reused across memories, with their keyword vectors, and
   their token vectors under `--search rerank`), then the store's own
   start-up, the server's spawn -> first healthy answer (twice), and `--mixed` s of
   mixed load (8 callers, half commits, half 3-namespace searches).

Client and server share the machine (the client's CPU is not free). Figures
only, nothing is asserted. Server answers other than the expected status are
counted per status (0 = transport error or client timeout, 10 s). `cl.lag` is
the worst late wake-up of the client's own event loop during a phase: a large
one means the client or the whole machine stalled, not only the server.

Every server ranks by `--search` (hybrid or rerank); RSS is the server's and its
engine workers' together (`--workers` of them in step 3; each process's shared libraries
count in each).

Run: python -m benchmarks.namespaces [--namespaces 1000,10000 --duration 20] [--search rerank]
     [--workers 4]
     (about 4-5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from benchmarks.common import machine
from benchmarks.load import CALLERS
from benchmarks.load import HOT_SET
from benchmarks.load import SEARCH_LIMIT
from benchmarks.load import SEARCH_NAMESPACES
from benchmarks.load import SLOW_P99_MS
from benchmarks.load import TIMEOUT
from benchmarks.load import Phase
from benchmarks.load import Request
from benchmarks.load import Traffic
from benchmarks.load import closed_loop
from benchmarks.load import namespace_names
from benchmarks.load import print_phases
from benchmarks.load import server_rss
from benchmarks.load import slow_p99
from benchmarks.load import work_list
from benchmarks.namespaces_store import BATCH
from benchmarks.namespaces_store import DISTINCT
from benchmarks.namespaces_store import Model
from benchmarks.namespaces_store import measure_model
from benchmarks.namespaces_store import print_model
from benchmarks.namespaces_store import run_store_scale
from harness.server_process import ServerProcess

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
        loops: list[tuple[Phase, Callable[[random.Random], Request]]] = [
            (commit_all, lambda rng: traffic.commit(rng.choice(names), rng)),
            (commit_hot, lambda rng: traffic.commit(rng.choice(hot), rng)),
            (search, lambda rng: traffic.search(names, rng)),
        ]
        for offset, (phase, request) in enumerate(loops, start=1):
            await closed_loop(
                session,
                [phase],
                duration,
                lambda rng, phase=phase, request=request: (phase, request(rng)),
                seed + offset,
            )
    return [put_new, put_same, commit_all, commit_hot, search]


def run_scale(count: int, duration: float, model: Model, seed: int, search: str) -> float:
    """One fresh server with `count` namespaces; prints its table, returns its cold start."""
    settings = {"MEMORY_PLUGIN_SEARCH": search}
    with (
        tempfile.TemporaryDirectory(prefix="bench-ns-") as tmp,
        ServerProcess(Path(tmp) / "data", Path(tmp) / "server.log", env=settings) as server,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", default="1000,10000", help="comma-separated Ns")
    parser.add_argument("--duration", type=float, default=20.0, help="s per closed-loop phase")
    parser.add_argument("--store-namespaces", type=int, default=10_000, help="0 skips step 3")
    parser.add_argument("--per-namespace", type=int, default=20)
    parser.add_argument("--mixed", type=float, default=30.0, help="s of mixed load in step 3")
    parser.add_argument(
        "--search", choices=("hybrid", "rerank"), default="hybrid", help="the servers' ranking"
    )
    parser.add_argument(
        "--workers",
        type=int,
        choices=(1, 2, 4, 8, 16),
        default=1,
        help="step 3's engine workers (the store, written by one, is moved to them)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.namespaces.split(",") if n.strip()]
    if any(n < HOT_SET for n in counts):
        parser.error(f"every N must be at least {HOT_SET}")

    print(f"namespaces.py: real server, embedded qdrant-edge, 16 hashed shards ({machine()})")
    started = time.perf_counter()
    distinct = DISTINCT if args.store_namespaces else 0
    model = measure_model(distinct, tokens=args.search == "rerank")
    print_model(model)
    empty_cold = [run_scale(n, args.duration, model, 100 + n, args.search) for n in counts]
    if args.store_namespaces:
        run_store_scale(args, model, empty_cold)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
