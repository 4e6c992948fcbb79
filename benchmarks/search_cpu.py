"""Where a search's CPU goes, per ranking: the rerank's own cost against hybrid's.

    python -m benchmarks.search_cpu [--data PATH] [--seconds 8] [--rounds 2]

One store of LoCoMo's development half (written by a server on defaults: every memory has
its token vectors), copied; a server on each copy with MEMORY_PLUGIN_SEARCH forced to
`hybrid` and to `rerank` (every search reranked: the dimmer left out of what is measured).
Windows of 8 closed-loop callers asking LoCoMo's questions over 3 namespaces, limit 10,
alternate the servers (each round reversed). From each thread's schedstat
(benchmarks/commit_cpu.py): CPU per search in the server's event loop, in its other
threads (the model's sessions) and in the engine workers (all of them), summed over the
windows, per ranking, and the rerank's extra over hybrid's per process. The machine is
shared by both servers and the callers: compare the rows, not figures of another run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import locomo
from benchmarks.commit_cpu import Usage
from benchmarks.commit_cpu import usage
from benchmarks.common import machine
from benchmarks.default_ranking import TIMEOUT
from benchmarks.default_ranking import closed_loop
from benchmarks.default_ranking import question_bodies
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import servers_on_copies
from harness.server_process import ServerProcess

RANKINGS = ("hybrid", "rerank")
# Per process and thread kind: (CPU seconds, searches answered), summed over windows.
Spent = dict[str, list[float]]


def processes(server: ServerProcess) -> dict[str, int]:
    """The server and its engine workers (one or several), by name."""
    assert server.proc is not None
    found = {"server": server.proc.pid}
    for k, child in enumerate(server.children()):
        found[f"engine worker {k}"] = child
    return found


def snapshot(pids: dict[str, int]) -> dict[str, Usage]:
    """Each process's thread kinds; the engine workers' summed as one."""
    found: dict[str, Usage] = {}
    for name, pid in pids.items():
        name = "engine workers" if name.startswith("engine worker") else name
        held = found.setdefault(name, {})
        for kind, (ran, waited, slices) in usage(pid).items():
            was = held.get(kind, (0.0, 0.0, 0))
            held[kind] = (was[0] + ran, was[1] + waited, was[2] + slices)
    return found


async def window(
    server: ServerProcess, bodies: list[dict[str, Any]], seconds: float, spent: Spent
) -> None:
    """One window of closed-loop searches; its CPU and count added to `spent`."""
    pids = processes(server)
    before = snapshot(pids)
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        answered = len(await closed_loop(session, server.base_url, bodies, seconds))
    after = snapshot(pids)
    for name, threads in after.items():
        for kind, (ran, _, _) in threads.items():
            row = spent.setdefault(f"{name}, {kind}", [0.0, 0.0])
            row[0] += ran - before[name].get(kind, (0.0, 0.0, 0))[0]
    spent["searches"] = [0.0, spent.get("searches", [0.0, 0.0])[1] + answered]


def report(spent: dict[str, Spent]) -> None:
    searches = {ranking: spent[ranking]["searches"][1] for ranking in RANKINGS}
    print(
        f"\nCPU per search, ms ({', '.join(f'{r}: {searches[r]:.0f} searches' for r in RANKINGS)})"
    )
    print(f"  {'where':<30}" + "".join(f"{r:>10}" for r in RANKINGS) + f"{'extra':>10}")
    kinds = sorted({k for r in RANKINGS for k in spent[r] if k != "searches"})
    totals = dict.fromkeys(RANKINGS, 0.0)
    for kind in kinds:
        per = {r: spent[r].get(kind, [0.0])[0] / searches[r] * 1000 for r in RANKINGS}
        for r in RANKINGS:
            totals[r] += per[r]
        row = "".join(f"{per[r]:10.2f}" for r in RANKINGS)
        print(f"  {kind:<30}{row}{per['rerank'] - per['hybrid']:+10.2f}")
    row = "".join(f"{totals[r]:10.2f}" for r in RANKINGS)
    print(f"  {'both processes':<30}{row}{totals['rerank'] - totals['hybrid']:+10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"search CPU per ranking on {args.data.name} ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-search-cpu-") as tmp:
        servers = servers_on_copies(Path(tmp), conversations, RANKINGS)
        try:
            for server in servers.values():
                server.wait_weighed()  # a rerank weighs its tokens from the first search
            bodies = question_bodies(conversations)
            warm: dict[str, Spent] = {r: {} for r in RANKINGS}
            for ranking in RANKINGS:
                asyncio.run(window(servers[ranking], bodies, 2.0, warm[ranking]))
            spent: dict[str, Spent] = {r: {} for r in RANKINGS}
            for round_ in range(args.rounds):
                order = RANKINGS if round_ % 2 == 0 else RANKINGS[::-1]
                for ranking in order:
                    asyncio.run(window(servers[ranking], bodies, args.seconds, spent[ranking]))
            report(spent)
        finally:
            for server in servers.values():
                server.close()


if __name__ == "__main__":
    main()
