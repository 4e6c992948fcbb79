"""A burst of new namespaces on a fresh store while other processes keep the cores busy.

Against the real server process (`serve` defaults: embedded store, the shipped INFO
log), as on a node whose other pods are busy. Two processes spin on the two cores
(plain `while True`) from before the server starts until the end. The server runs
in a session of its own (harness/server_process.py), so where the kernel
groups tasks by session (autogroup, on here: /proc/sys/kernel/sched_autogroup_enabled)
its processes share the cores with the spinners as one group, as a pod's share
the node with other pods'; inside it the plugin's own priorities hold. Then, each
request on its own kept-alive connection opened beforehand, all sent at the same
moment, each given the platform's 2 s:

1. 200 PUTs of new namespaces (`workspace:cold-N`, spread over every shard);
2. `--commits` commits (1 unless told) into each of them, each namespace's one after
   another on its connection, the namespaces all at once.

Checks: no 503 and no timeout in either burst (a 429 is the plugin saying it is
over capacity, which the platform's client survives). Prints the server's cold
start, each burst's statuses and latencies, and the server log's 5xx answers and errors
counted by message. About a minute.
`python -m benchmarks.cold_burst [--namespaces 200 --spinners 2 --commits 1]`
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.bursts import shown
from benchmarks.common import machine
from benchmarks.fairness_load import Texts
from benchmarks.fairness_load import check
from benchmarks.fairness_load import command_line
from benchmarks.fairness_load import commit_request
from benchmarks.fairness_load import server_failures
from benchmarks.fairness_load import warm
from benchmarks.http_caller import Connection
from benchmarks.http_caller import Request
from benchmarks.http_caller import gather_then_close
from harness.raw_http import log_lines
from harness.server_process import ServerProcess

CLIENT_TIMEOUT_S = 2.0
SPIN = "while True: pass"


async def at_once(base: str, requests: Sequence[Request]) -> list[tuple[int, float]]:
    """Each request on a connection of its own, all sent at the same moment."""
    series = await in_series(base, [[request] for request in requests])
    return [answer for answers in series for answer in answers]


async def in_series(
    base: str, series: Sequence[Sequence[Request]]
) -> list[list[tuple[int, float]]]:
    """Each series on a connection of its own, one request after another (a timeout ends
    it: the connection may still hold its answer), the series all started at once."""
    connections = [Connection(base, CLIENT_TIMEOUT_S) for _ in series]
    await warm(connections)

    async def one(connection: Connection, requests: Sequence[Request]) -> list[tuple[int, float]]:
        answers = []
        for request in requests:
            status, took, _ = await connection.send(request)
            answers.append((status, took))
            if status == 0:
                break
        return answers

    runs = (one(c, requests) for c, requests in zip(connections, series, strict=True))
    return await gather_then_close(connections, *runs)


def failed(outcomes: Sequence[tuple[int, float]]) -> int:
    """Answers the platform's client counts against its breaker: 5xx and timeouts."""
    return sum(1 for status, took in outcomes if status == 0 or status >= 500)


def main() -> None:
    args = command_line(__doc__, namespaces=200, spinners=2, commits=1).parse_args()
    texts = Texts(args.data)
    rng = random.Random(7)
    names = [f"workspace:cold-{n}" for n in range(args.namespaces)]
    puts: list[Request] = [("PUT", f"/v1/namespaces/{n}", {"kind": "workspace"}) for n in names]
    commits = [
        [commit_request(n, rng.choice(texts.turns), rng) for _ in range(args.commits)]
        for n in names
    ]
    print(f"cold_burst ({machine()}); {args.spinners} spinning processes")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.spinners)]
    results = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-") as tmp,
            ServerProcess(Path(tmp) / "data", Path(tmp) / "server.log", log_level="INFO") as server,
        ):
            server.start()
            print(f"cold start (spawn -> first 200 on /v1/health): {server.wait_healthy():.2f} s")
            outcomes = asyncio.run(at_once(server.base_url, puts))
            results.append(
                check(
                    f"{len(puts)} namespace PUTs at once: no 503, no timeout",
                    failed(outcomes) == 0,
                    shown(outcomes),
                )
            )
            series = asyncio.run(in_series(server.base_url, commits))
            outcomes = [answer for answers in series for answer in answers]
            results.append(
                check(
                    f"then {args.commits} commit(s) into each, one after another, the"
                    " namespaces at once: no 503, no timeout",
                    failed(outcomes) == 0,
                    shown(outcomes),
                )
            )
            server.terminate()
            print(server_failures(log_lines(server)))
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(f"{sum(results)} of {len(results)} checks passed")


if __name__ == "__main__":
    main()
