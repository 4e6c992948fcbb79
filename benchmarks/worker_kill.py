"""How long the embedded store is away when its engine worker is killed, under load.

Against the real server process (`serve` defaults): 8 callers committing and 8 searching,
each into a namespace of its own, one request at a time; the engine worker (the server's
child process) is killed with SIGKILL `--kills` times, 2 s apart. For each kill: how long
until the worker has exited (its pidfd), the 5xx answered within 2 s, the slowest answer in
flight across it (the pause a caller sees while a spare replaces the worker), and any first
503 with the worker's state at the kill (`D`: in the kernel, as in a sync, which a kill
waits out); every status seen, and the longest any namespace went without a 2xx. With
`--workers N`, worker 0 of N is killed, and its namespaces' statuses and the others' are
printed apart. What survives a kill is
tests/worker/test_worker_crash.py's to check. `python -m benchmarks.worker_kill [--kills 20]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

from adapters.store_files import worker_of
from benchmarks.common import machine
from benchmarks.common import percentile
from harness.server_process import ServerProcess

WRITERS = 8
SEARCHERS = 8


def worker_pid(server: ServerProcess, workers: int) -> int:
    """The engine worker that holds the whole store, or worker 0 of several."""
    for child in server.workers():
        if workers == 1 or f"/workers/0-of-{workers}" in Path(f"/proc/{child}/cmdline").read_text():
            return child
    raise RuntimeError("no engine worker found")


def state_of(pid: int) -> str:
    """The process's state letter (`R`, `S`, `D`...) from /proc."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def mark_exit(exited: asyncio.Future[float], pidfd: int) -> None:
    """The process has exited: when, once (a pidfd stays readable, so stop watching it)."""
    asyncio.get_running_loop().remove_reader(pidfd)
    if not exited.done():
        exited.set_result(time.monotonic())


def killed(name: str, workers: int) -> bool:
    """Whether `name` belongs to the worker killed (edge_client.py's routing)."""
    return worker_of(name, workers) == 0


async def measure(server: ServerProcess, kills: int, workers: int) -> None:
    base = server.base_url
    # (sent, answered, status, the killed worker's, namespace)
    answers: list[tuple[float, float, int, bool, str]] = []
    done = asyncio.Event()

    async def caller(session: aiohttp.ClientSession, n: int, write: bool) -> None:
        name = f"workspace:kill-{n}"
        its = killed(name, workers)
        await session.put(f"{base}/v1/namespaces/{name}", json={"kind": "workspace"})
        i = 0
        while not done.is_set():
            i += 1
            sent = time.monotonic()
            body: dict[str, object]
            if write:
                body = {"content": f"fact {i} of {name}", "kind": "fact", "source": "agent"}
                request = session.post(f"{base}/v1/namespaces/{name}/memories", json=body)
            else:
                body = {"namespaces": [name], "query": "which fact", "limit": 5}
                request = session.post(f"{base}/v1/search", json=body)
            async with request as reply:
                await reply.read()
                answers.append((sent, time.monotonic(), reply.status, its, name))
            if reply.status == 503:
                await asyncio.sleep(0.005)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        load = [asyncio.create_task(caller(session, n, n < WRITERS)) for n in range(16)]
        await asyncio.sleep(2.0)
        killed_at: list[float] = []
        states: list[str] = []
        exits: list[float] = []
        loop = asyncio.get_running_loop()
        for _ in range(kills):
            pid = worker_pid(server, workers)
            pidfd = os.pidfd_open(pid)
            exited = loop.create_future()
            loop.add_reader(pidfd, mark_exit, exited, pidfd)
            states.append(state_of(pid))
            killed_at.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(2.0)
            loop.remove_reader(pidfd)
            os.close(pidfd)
            exits.append(exited.result() - killed_at[-1] if exited.done() else float("nan"))
        done.set()
        await asyncio.gather(*load)
    report(answers, killed_at, states, exits, kills)


def report(
    answers: list[tuple[float, float, int, bool, str]],
    killed_at: list[float],
    states: list[str],
    exits: list[float],
    kills: int,
) -> None:
    """Per kill, over the killed worker's namespaces' answers: the 5xx, the slowest answer
    in flight across it (the pause a caller sees), the first 503; and each namespace's
    longest stretch without a 2xx."""
    refused, pauses, slow, errors = [], [], [], 0
    for k, at in enumerate(killed_at):
        around = [a for a in answers if a[3] and a[1] >= at and a[0] < at + 2.0]
        errors += sum(1 for a in around if a[2] >= 500)
        pauses.append(max((a[1] - a[0] for a in around), default=0.0))
        after = sorted((a for a in around if a[0] >= at), key=lambda a: a[1])
        first_503 = next((a[1] for a in after if a[2] == 503), None)
        if first_503 is not None:
            refused.append(first_503 - at)
            slow.append(
                f"{(first_503 - at) * 1000:.0f} ms ({states[k]}, exit {exits[k] * 1000:.0f} ms)"
            )
    for label, its in (("the killed worker's namespaces", True), ("the others'", False)):
        statuses = Counter(a[2] for a in answers if a[3] is its)
        if statuses:
            print(f"statuses, {label}: {dict(sorted(statuses.items()))}")
    print(f"  answers 5xx within 2 s of a kill: {errors}")
    outcomes = (("worker exited", exits), ("slowest answer across a kill", pauses))
    for label, values in outcomes:
        ms = [v * 1000 for v in values]
        print(
            f"  {label}: {len(ms)} of {kills} kills, p50 {percentile(ms, 50):.0f} ms, "
            f"max {max(ms):.0f} ms"
        )
    print(f"  longest a namespace went without a 2xx: {longest_outage(answers) * 1000:.0f} ms")
    print(f"  first 503 after a kill (state at the kill, exit): {', '.join(slow) or 'none'}")


def longest_outage(answers: list[tuple[float, float, int, bool, str]]) -> float:
    """The longest time from a failed request's sending to its namespace's next 2xx."""
    longest = 0.0
    failing_since: dict[str, float] = {}
    for sent, answered, status, _, name in sorted(answers, key=lambda a: a[1]):
        if status >= 300:
            failing_since.setdefault(name, sent)
        elif name in failing_since:
            longest = max(longest, answered - failing_since.pop(name))
    return longest


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1, help="MEMORY_PLUGIN_ENGINE_WORKERS")
    args = parser.parse_args()
    print(f"engine worker kills, {args.workers} worker(s) ({machine()})")
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        ServerProcess(
            Path(tmp) / "data",
            Path(tmp) / "log",
            env={"MEMORY_PLUGIN_ENGINE_WORKERS": str(args.workers)},
            log_level="INFO",
        ) as server,
    ):
        server.start()
        server.wait_healthy()
        asyncio.run(measure(server, args.kills, args.workers))
        print(f"server still running: {server.running}")


if __name__ == "__main__":
    main()
