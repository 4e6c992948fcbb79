"""Where the CPU goes while 8 closed-loop callers commit: per process and thread kind.

Against the real server process (`serve` defaults, the shipped INFO log, wide
admission shares), wrk driving 8 connections committing with ids into one
namespace for one window of `CLOSED_LOOP_S` (after a warm-up window). From the
kernel's per-thread schedstat (/proc/PID/task/TID/schedstat), for the server and
its engine worker, each split into its main thread (the event loop) and the rest
(the model's sessions, the sync and worker threads): CPU time per commit, time
spent runnable but waiting for a core per commit, and how many times a commit
woke each. The two processes' CPU against the machine's cores says whether the
closed loop is short of CPU or waiting on something. `--search hybrid` runs the server
with that ranking forced, which keeps no token vectors: the default's figure against it is
what the token vectors cost a commit. Needs `wrk` and Linux.
`python -m benchmarks.commit_cpu [--search hybrid]`
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.closed_loop import CLOSED_LOOP_S
from benchmarks.closed_loop import wrk_closed_loop
from benchmarks.common import machine
from benchmarks.sentences import sentences
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess

NAMESPACE = "workspace:commit-cpu"
# (seconds on a core, seconds runnable and waiting, times scheduled) per thread kind
Usage = dict[str, tuple[float, float, int]]


def usage(pid: int) -> Usage:
    """Schedstat summed over the main thread and over the others."""
    found: Usage = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            ran, waited, slices = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except FileNotFoundError:  # the thread ended
            continue
        kind = "event loop" if tid == str(pid) else "other threads"
        before = found.get(kind, (0.0, 0.0, 0))
        found[kind] = (
            before[0] + int(ran) / 1e9,
            before[1] + int(waited) / 1e9,
            before[2] + int(slices),
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--search", help="MEMORY_PLUGIN_SEARCH for the server (default: unset)")
    args = parser.parse_args()
    env = {**WIDE_SHARES, **({"MEMORY_PLUGIN_SEARCH": args.search} if args.search else {})}
    print(f"commit_cpu, search {args.search or 'unset'} ({machine()})")
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        ServerProcess(Path(tmp) / "data", Path(tmp) / "server.log", env=env) as server,
    ):
        server.start()
        server.wait_healthy()
        put = urllib.request.Request(
            f"{server.base_url}/v1/namespaces/{NAMESPACE}",
            data=b'{"kind": "workspace"}',
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(put, timeout=10).read()
        assert server.proc is not None
        pids = {"server": server.proc.pid}
        for child in server.workers()[:1]:  # the engine worker, when the store has one
            pids["engine worker"] = child
        url = f"{server.base_url}/v1/namespaces/{NAMESPACE}/memories"
        texts = sentences(4000)
        if wrk_closed_loop(url, texts, 0) is None:
            raise SystemExit("commit_cpu needs wrk (Debian: apt install wrk)")
        before = {name: usage(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        rate = wrk_closed_loop(url, texts, 1) or 0.0
        wall = time.perf_counter() - started
        after = {name: usage(pid) for name, pid in pids.items()}
    commits = rate * CLOSED_LOOP_S
    print(f"8 closed-loop callers (wrk): {rate:.0f} commits/s; {os.cpu_count()} cores")
    total = 0.0
    for name, threads in after.items():
        for kind, (ran, waited, slices) in threads.items():
            was = before[name].get(kind, (0.0, 0.0, 0))
            ran, waited, slices = ran - was[0], waited - was[1], slices - was[2]
            total += ran
            print(
                f"  {name}, {kind}: {ran / wall:.0%} of a core; per commit "
                f"{ran / commits * 1000:.2f} ms on a core, {waited / commits * 1000:.2f} ms "
                f"waiting for one, scheduled {slices / commits:.1f} times"
            )
    print(f"  both processes: {total / wall:.0%} of a core, of {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
