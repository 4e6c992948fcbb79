"""One workspace's burst on an idle plugin: served whole while it fits the deadline.

Against the real server process (`serve` defaults: embedded store, the shipped INFO
log), with LoCoMo's dialog turns as memories. Every request of a round is sent at
the same moment, each on its own kept-alive connection opened beforehand, and the
client gives each call the platform's 2 s:

1. 100 commits into one namespace at once, three rounds: every one 201, the slowest
   under 2 s.
2. 20, then 40 agents of one workspace each doing what the platform does for a
   write (PUT the namespace, then commit), ten rounds: no refusal.
3. 1,000 commits of one tenant at once, three rounds: every request answered, 201
   or 429, within 2 s; no 503, no timeout.

Before each round it prints what the plugin takes a request to cost then (the
admission gauge). The model's own rate, in this process, is printed as the
yardstick. About a minute.
`python -m benchmarks.bursts [--data PATH]`
"""

from __future__ import annotations

import asyncio
import random
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from collections.abc import Sequence

from benchmarks.common import percentile
from benchmarks.fairness_load import Texts
from benchmarks.fairness_load import check
from benchmarks.fairness_load import commit_request
from benchmarks.fairness_load import run_checks
from benchmarks.fairness_load import warm
from benchmarks.http_caller import Connection
from benchmarks.http_caller import Request
from benchmarks.http_caller import gather_then_close

BURST = "workspace:burst"
AGENTS = "workspace:agents"
HUGE = "workspace:huge"
CLIENT_TIMEOUT_S = 2.0

# One agent's write: the requests it sends one after the other.
Script = Callable[[random.Random], Sequence[Request]]


async def burst(base: str, callers: int, script: Script, seed: int) -> list[tuple[int, float]]:
    """`callers` connections, opened first; then each sends its script at the same moment.
    (status, seconds) of every request."""
    connections = [Connection(base, CLIENT_TIMEOUT_S) for _ in range(callers)]
    await warm(connections)
    gate = asyncio.Event()
    out: list[tuple[int, float]] = []

    async def caller(connection: Connection, rng: random.Random) -> None:
        requests = script(rng)
        await gate.wait()
        for request in requests:
            status, took, _ = await connection.send(request)
            out.append((status, took))

    tasks = [
        asyncio.create_task(caller(c, random.Random(seed * 100_003 + n)))
        for n, c in enumerate(connections)
    ]
    await asyncio.sleep(0.2)  # every caller waits at the gate
    gate.set()
    await gather_then_close(connections, *tasks)
    return out


def request_cost_ms(base: str) -> float:
    """What the plugin takes one more request to cost now (its admission gauge)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("memory_plugin_admission_request_cost_seconds "):
                return float(line.split()[1]) * 1000
    raise RuntimeError("no memory_plugin_admission_request_cost_seconds in /metrics")


def shown(outcomes: Sequence[tuple[int, float]]) -> str:
    statuses = Counter(status for status, _ in outcomes)
    ms = [took * 1000 for _, took in outcomes]
    counts = ", ".join(f"{n} x {s or 'timeout'}" for s, n in sorted(statuses.items()))
    return f"{counts}; p50 {percentile(ms, 50):.0f} ms, max {max(ms):.0f} ms"


def measure(base: str, texts: Texts, duration: float) -> list[bool]:
    del duration  # rounds, not a duration

    def commit_into(namespace: str) -> Script:
        return lambda rng: [commit_request(namespace, rng.choice(texts.turns), rng)]

    def agent(rng: random.Random) -> Sequence[Request]:
        put: Request = ("PUT", f"/v1/namespaces/{AGENTS}", {"kind": "workspace"})
        return [put, commit_request(AGENTS, rng.choice(texts.turns), rng)]

    def rounds(callers: int, script: Script, count: int, label: str) -> list[tuple[int, float]]:
        everything: list[tuple[int, float]] = []
        for n in range(count):
            cost_ms = request_cost_ms(base)
            started = time.perf_counter()
            outcomes = asyncio.run(burst(base, callers, script, seed=n + 1))
            everything += outcomes
            took = time.perf_counter() - started
            print(
                f"  {label}, round {n + 1} (a request's cost before it {cost_ms:.1f} ms): "
                f"{shown(outcomes)}; all answered in {took:.2f} s"
            )
        return everything

    results = []
    hundred = rounds(100, commit_into(BURST), 3, "100 commits at once")
    slowest = max(took for _, took in hundred)
    results.append(
        check(
            "100 commits at once: all 201, slowest under 2 s",
            all(s == 201 for s, _ in hundred) and slowest < CLIENT_TIMEOUT_S,
            shown(hundred),
        )
    )
    for agents in (20, 40):
        writes = rounds(agents, agent, 10, f"{agents} agents, PUT then commit")
        refused = sum(1 for s, _ in writes if s == 429)
        results.append(
            check(
                f"{agents} agents x 10 rounds: no refusal, no failure",
                all(s in (200, 201) for s, _ in writes),
                f"{refused} refused; {shown(writes)}",
            )
        )
    huge = rounds(1000, commit_into(HUGE), 3, "1,000 commits at once")
    failed = sum(1 for s, _ in huge if s not in (201, 429))
    slowest = max(took for _, took in huge)
    results.append(
        check(
            "1,000 commits at once: each 201 or 429 within 2 s",
            failed == 0 and slowest < CLIENT_TIMEOUT_S,
            shown(huge),
        )
    )
    return results


def main() -> None:
    layout = {BURST: 0, AGENTS: 0, HUGE: 0, "workspace:warm-a": 20, "workspace:warm-b": 20}
    run_checks(__doc__, "bursts", {}, layout, measure)


if __name__ == "__main__":
    main()
