"""The default ranking (reranked while the plugin has room, dimmed to hybrid when not) against
`hybrid`, under the loads the rerank dimmer is for.

    python -m benchmarks.default_ranking [--data PATH] [--seconds 6] [--rounds 3]

One store of LoCoMo's development half (dialog turns and observations, committed by a server
on defaults, so every memory has its token vectors), copied twice; a server on each copy, one
with no setting, one with MEMORY_PLUGIN_SEARCH=hybrid. Queries are LoCoMo's questions over 3
namespaces, limit 10. Windows alternate the two servers, each round reversed (drift hits both
alike); the figures are medians over windows.
1. **Saturated:** 8 closed-loop callers. The default's searches a second and p99 against
   hybrid's (targets: >= 0.95x, <= 1.2x), and the share it reranked.
2. **Ordinary:** an open-loop load (Poisson arrivals) at a third of hybrid's saturated rate.
   The share the default reranked (>= 90 %) and its p99 against hybrid's at the same load
   (<= 2x).
3. **After a burst:** on the default server, the ordinary load throughout, and 8 closed-loop
   callers for `--seconds` in its middle; the share reranked per half second from the
   metrics, and the time from the burst's end until the share reranked is back over 90 %
   (target: within 5 s).
About 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.common import percentile
from benchmarks.common import reranked_share
from benchmarks.common import searches_by_ranking
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import servers_on_copies

CALLERS = 8
TIMEOUT = aiohttp.ClientTimeout(total=30)


def question_bodies(conversations: list[locomo.Conversation]) -> list[dict[str, Any]]:
    """Every question of the file as a search over the first 3 conversations' dialog
    namespaces, limit 10: the load both this and benchmarks/search_cpu.py ask."""
    searched = [c.namespace("dialog") for c in conversations[:3]]
    questions = [q.text for c in conversations for q in c.questions]
    return [{"namespaces": searched, "query": q, "limit": 10} for q in questions]


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


async def counted(session: aiohttp.ClientSession, base: str) -> dict[str, float]:
    """The server's searches so far, by what ranked them."""
    async with session.get(f"{base}/metrics") as response:
        return searches_by_ranking(await response.text())


async def search(
    session: aiohttp.ClientSession, base: str, body: dict[str, Any], into: list[float]
) -> None:
    started = time.perf_counter()
    async with session.post(f"{base}/v1/search", json=body) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"search answered {response.status}")
    into.append(time.perf_counter() - started)


async def closed_loop(
    session: aiohttp.ClientSession, base: str, bodies: Sequence[dict[str, Any]], seconds: float
) -> list[float]:
    """`CALLERS` callers, each sending its next search when the last is answered."""
    durations: list[float] = []
    deadline = time.perf_counter() + seconds

    async def caller(seed: int) -> None:
        picked = random.Random(seed)
        while time.perf_counter() < deadline:
            await search(session, base, picked.choice(bodies), durations)

    await asyncio.gather(*(caller(seed) for seed in range(CALLERS)))
    return durations


async def open_loop(
    session: aiohttp.ClientSession,
    base: str,
    bodies: Sequence[dict[str, Any]],
    rate: float,
    seconds: float,
    seed: int,
) -> list[float]:
    """Searches arriving at `rate` a second (exponential gaps), whatever is answered."""
    durations: list[float] = []
    picked = random.Random(seed)
    tasks = []
    deadline = time.perf_counter() + seconds
    due = time.perf_counter()
    while due < deadline:
        due += picked.expovariate(rate)
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        body = picked.choice(bodies)
        tasks.append(asyncio.create_task(search(session, base, body, durations)))
    await asyncio.gather(*tasks)
    return durations


async def windows(
    bases: dict[str, str],
    bodies: Sequence[dict[str, Any]],
    seconds: float,
    rounds: int,
    rate: float | None,
) -> dict[str, list[tuple[float, float, float]]]:
    """Alternating windows; per server, (searches a second, p99 s, share reranked) each."""
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in bases}
    names = list(bases)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        for number in range(rounds):
            for name in names[:: 1 - 2 * (number % 2)]:
                base = bases[name]
                before = await counted(session, base)
                if rate is None:
                    durations = await closed_loop(session, base, bodies, seconds)
                else:
                    durations = await open_loop(session, base, bodies, rate, seconds, number)
                share = reranked_share(before, await counted(session, base))
                row = (len(durations) / seconds, percentile(durations, 99), share)
                found[name].append(row)
                print(
                    f"  {name:<8} {row[0]:6.1f}/s  p50 {percentile(durations, 50) * 1000:6.1f} ms"
                    f"  p99 {row[1] * 1000:6.1f} ms  reranked {share:6.1%}"
                )
    return found


def medians(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return (
        statistics.median(r[0] for r in rows),
        statistics.median(r[1] for r in rows),
        statistics.median(r[2] for r in rows),
    )


async def after_burst(
    base: str, bodies: Sequence[dict[str, Any]], rate: float, seconds: float
) -> float | None:
    """The ordinary load for 3 x `seconds`, a saturating burst in its middle third; the share
    reranked per half second; seconds from the burst's end until it is over 90 % again."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        ordinary = asyncio.create_task(open_loop(session, base, bodies, rate, 3 * seconds, 99))
        await asyncio.sleep(seconds)
        burst_end = time.perf_counter() + seconds
        burst = asyncio.create_task(closed_loop(session, base, bodies, seconds))
        shares: list[tuple[float, float]] = []
        before = await counted(session, base)
        while not ordinary.done():
            await asyncio.sleep(0.5)
            after = await counted(session, base)
            shares.append((time.perf_counter() - burst_end, reranked_share(before, after)))
            before = after
        await burst
        await ordinary
    print("  seconds from the burst's end, share reranked in the half second before:")
    print("  " + "  ".join(f"{at:+.1f}: {share:.0%}" for at, share in shares))
    back = [at for at, share in shares if at > 0 and share > 0.9]
    return back[0] if back else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"default ranking against hybrid on {args.data.name} ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-default-ranking-") as tmp_name:
        tmp = Path(tmp_name)
        servers = servers_on_copies(tmp, conversations, ("default", "hybrid"))
        try:
            for server in servers.values():
                server.wait_weighed()  # a rerank weighs its tokens from the first search
            bases = {name: server.base_url for name, server in servers.items()}
            bodies = question_bodies(conversations)
            asyncio.run(windows(bases, bodies, 2.0, 1, None))  # warm both: caches, sessions

            print(f"\n1. saturated: {CALLERS} closed-loop callers, windows of {args.seconds:g} s")
            saturated = asyncio.run(windows(bases, bodies, args.seconds, 2 * args.rounds, None))
            rate, p99, _ = medians(saturated["hybrid"])
            d_rate, d_p99, d_share = medians(saturated["default"])
            print(
                f"  default / hybrid: searches a second {d_rate / rate:.2f}x (>= 0.95x:"
                f" {verdict(d_rate / rate >= 0.95)}), p99 {d_p99 / p99:.2f}x (<= 1.2x:"
                f" {verdict(d_p99 / p99 <= 1.2)}); the default reranked {d_share:.1%}"
            )

            ordinary_rate = rate / 3
            print(f"\n2. ordinary: open loop at {ordinary_rate:.0f}/s (a third of hybrid's rate)")
            ordinary = asyncio.run(
                windows(bases, bodies, args.seconds, 2 * args.rounds, ordinary_rate)
            )
            _, o_p99, _ = medians(ordinary["hybrid"])
            _, od_p99, od_share = medians(ordinary["default"])
            print(
                f"  the default reranked {od_share:.1%} (>= 90 %: {verdict(od_share >= 0.9)});"
                f" p99 {od_p99 * 1000:.1f} ms against hybrid's {o_p99 * 1000:.1f} ms:"
                f" {od_p99 / o_p99:.2f}x (<= 2x: {verdict(od_p99 / o_p99 <= 2)})"
            )

            print(f"\n3. after a burst: {CALLERS} closed-loop callers for {args.seconds:g} s")
            back = asyncio.run(after_burst(bases["default"], bodies, ordinary_rate, args.seconds))
            shown = "never" if back is None else f"{back:.1f} s"
            ok = back is not None and back <= 5.0
            print(f"  back over 90 % reranked after {shown} (within 5 s: {verdict(ok)})")
        finally:
            for server in servers.values():
                server.close()


if __name__ == "__main__":
    main()
