"""Where a search's CPU goes, per ranking: the rerank's own cost against hybrid's.

    python -m benchmarks.search_cpu [--data PATH] [--seconds 8] [--rounds 2] [--against DIR]

One store of LoCoMo's development half (written by a server on defaults: every memory has
its token vectors), copied; a server on each copy with MEMORY_PLUGIN_SEARCH forced to
`hybrid` and to `rerank` (every search reranked: the dimmer left out of what is measured).
Windows of 8 closed-loop callers asking LoCoMo's questions over 3 namespaces, limit 10,
alternate the servers (each round reversed). From each thread's schedstat
(benchmarks/commit_cpu.py): CPU per search in the server's event loop, in its other
threads (the model's sessions) and in the engine workers (all of them), summed over the
windows, per ranking, and the rerank's extra over hybrid's per process. With `--against
DIR` (a checkout of another commit: `git worktree add DIR <commit>`), a third server on a
copy runs that checkout's code, `rerank` forced, as a yardstick in the same windows: the
rerank's extra over it is what the commits between cost. The machine is shared by the
servers and the callers: compare the rows, not figures of another run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from adapters.disk import sparse_copy
from benchmarks import locomo
from benchmarks.commit_cpu import Usage
from benchmarks.commit_cpu import usage
from benchmarks.common import machine
from benchmarks.default_ranking import TIMEOUT
from benchmarks.default_ranking import closed_loop
from benchmarks.default_ranking import question_bodies
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import ranking_env
from benchmarks.retrieval import servers_on_copies
from harness.server_process import ServerProcess

RANKINGS = ("hybrid", "rerank")
# The yardstick's column: `rerank` forced on another checkout's code.
AGAINST = "then"
# Per process and thread kind: (CPU seconds, searches answered), summed over windows.
Spent = dict[str, list[float]]


def processes(server: ServerProcess) -> dict[str, int]:
    """The server and its engine workers (one or several), by name."""
    assert server.proc is not None
    found = {"server": server.proc.pid}
    for k, child in enumerate(server.workers()):
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
    """A column per server; the rerank's extra over hybrid, and over the yardstick if any."""
    labels = list(spent)
    searches = {label: spent[label]["searches"][1] for label in labels}
    counts = ", ".join(f"{label}: {searches[label]:.0f} searches" for label in labels)
    print(f"\nCPU per search, ms ({counts})")
    extras = {"extra": "hybrid"} | ({"vs then": AGAINST} if AGAINST in spent else {})
    print(
        f"  {'where':<30}"
        + "".join(f"{label:>10}" for label in labels)
        + "".join(f"{extra:>10}" for extra in extras)
    )
    kinds = sorted({k for label in labels for k in spent[label] if k != "searches"})
    totals = dict.fromkeys(labels, 0.0)
    rows = []
    for kind in kinds:
        per = {label: spent[label].get(kind, [0.0])[0] / searches[label] * 1000 for label in labels}
        for label in labels:
            totals[label] += per[label]
        rows.append((kind, per))
    rows.append(("both processes", totals))
    for kind, per in rows:
        row = "".join(f"{per[label]:10.2f}" for label in labels)
        row += "".join(f"{per['rerank'] - per[base]:+10.2f}" for base in extras.values())
        print(f"  {kind:<30}{row}")


def yardstick(tmp: Path, checkout: Path) -> ServerProcess:
    """A server on a copy of the written store running `checkout`'s code, `rerank` forced
    (its modules first on the path, ahead of this checkout's install)."""
    shutil.copytree(tmp / "written", tmp / AGAINST, copy_function=sparse_copy)
    env = {**ranking_env("rerank"), "PYTHONPATH": str(checkout)}
    return ServerProcess(tmp / AGAINST, tmp / f"{AGAINST}.log", env=env).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", type=Path, metavar="DIR", help="a checkout to compare")
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"search CPU per ranking on {args.data.name} ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-search-cpu-") as tmp:
        servers = servers_on_copies(Path(tmp), conversations, RANKINGS)
        if args.against is not None:
            servers[AGAINST] = yardstick(Path(tmp), args.against.resolve())
        labels = tuple(servers)
        try:
            for server in servers.values():
                server.wait_weighed()  # a rerank weighs its tokens from the first search
            bodies = question_bodies(conversations)
            warm: dict[str, Spent] = {label: {} for label in labels}
            for label in labels:
                asyncio.run(window(servers[label], bodies, 2.0, warm[label]))
            spent: dict[str, Spent] = {label: {} for label in labels}
            for round_ in range(args.rounds):
                order = labels if round_ % 2 == 0 else labels[::-1]
                for label in order:
                    asyncio.run(window(servers[label], bodies, args.seconds, spent[label]))
            report(spent)
        finally:
            for server in servers.values():
                server.close()


if __name__ == "__main__":
    main()
