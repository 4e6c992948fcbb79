"""A `hybrid` store switched to `rerank`: its token vectors filled in while it serves.

    python -m benchmarks.token_fill [--memories 10000]

Writes `--memories` memories (LoCoMo's dialog turns, cycled, each with its own id) in
`hybrid` mode, so none has token vectors, and stops. Starts the same data directory in
`rerank` mode, whose start fills every memory's token vectors in the background, and
meanwhile keeps 2 callers searching and 2 committing, one request at a time each, as
agents would. Prints how long the fill took (the server's "token vectors filled in" log
line), every answer's status, and the callers' latency: the check is that the fill
finishes while no answer takes over 2 s (the platform's timeout) and none is a 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import aiohttp

from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.common import percentile
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import PATIENT
from harness.server_process import ServerProcess

NAMESPACES = 20
IN_FLIGHT = 8
CALLERS = 2  # of each kind
DEADLINE_S = 2.0
GIVE_UP_S = 600.0
FILLED = "token vectors filled in"


def contents(count: int) -> list[str]:
    turns = [
        c for conv in locomo.load(DEFAULT_DATA, "speaker") for _, _, c in conv.memories["dialog"]
    ]
    return [text for text, _ in zip(itertools.cycle(turns), range(count), strict=False)]


async def write(base: str, texts: list[str]) -> None:
    """Every text as a memory with an id, `IN_FLIGHT` at a time, over `NAMESPACES`."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    async with aiohttp.ClientSession() as session:
        for n in range(NAMESPACES):
            await session.put(
                f"{base}/v1/namespaces/workspace:fill-{n}", json={"kind": "workspace"}
            )

        async def one(i: int, text: str) -> None:
            body = {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"fill-{i}")),
                "content": text,
                "kind": "fact",
                "source": "agent",
            }
            url = f"{base}/v1/namespaces/workspace:fill-{i % NAMESPACES}/memories"
            async with gate, session.post(url, json=body) as reply:
                if reply.status != 201:
                    raise RuntimeError(f"commit answered {reply.status}: {await reply.text()}")

        await asyncio.gather(*(one(i, text) for i, text in enumerate(texts)))


def filled(server: ServerProcess) -> dict[str, object] | None:
    """The fill's log record, once the server has written it."""
    for line in server.log_text().splitlines():
        if FILLED in line:
            try:
                found: dict[str, object] = json.loads(line)
            except ValueError:
                return {"message": line}
            return found
    return None


Answer = tuple[str, int, float]  # (kind, status or 0 for a timeout, seconds)


async def serve_meanwhile(
    server: ServerProcess, texts: list[str]
) -> tuple[list[Answer], float | None]:
    """Searches and commits, one at a time per caller, until the fill is done."""
    answers: list[Answer] = []
    started = time.monotonic()
    done_at: float | None = None
    timeout = aiohttp.ClientTimeout(total=DEADLINE_S)

    async def caller(session: aiohttp.ClientSession, n: int, search: bool) -> None:
        base, i = server.base_url, 0
        while done_at is None and time.monotonic() - started < GIVE_UP_S:
            i += 1
            namespace = f"workspace:fill-{(n * 7 + i) % NAMESPACES}"
            if search:
                url, body = (
                    f"{base}/v1/search",
                    {"namespaces": [namespace], "query": texts[i % len(texts)], "limit": 10},
                )
            else:
                url = f"{base}/v1/namespaces/{namespace}/memories"
                body = {
                    "content": f"meanwhile {n}-{i}: {texts[i % len(texts)]}",
                    "kind": "fact",
                    "source": "agent",
                }
            sent = time.monotonic()
            try:
                async with session.post(url, json=body) as reply:
                    await reply.read()
                    status = reply.status
            except TimeoutError:
                status = 0
            answers.append(("search" if search else "commit", status, time.monotonic() - sent))
            await asyncio.sleep(0.01)

    async def watch() -> None:
        nonlocal done_at
        while time.monotonic() - started < GIVE_UP_S:
            if filled(server) is not None:
                done_at = time.monotonic()
                return
            await asyncio.sleep(0.25)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(watch(), *(caller(session, n, n % 2 == 0) for n in range(2 * CALLERS)))
    return answers, None if done_at is None else done_at - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    args = parser.parse_args()
    print(f"token fill of {args.memories} memories ({machine()})")
    texts = contents(args.memories)
    with tempfile.TemporaryDirectory(prefix="bench-token-fill-") as tmp:
        data = Path(tmp) / "data"
        with ServerProcess(
            data, Path(tmp) / "hybrid.log", env={"MEMORY_PLUGIN_SEARCH": "hybrid", **PATIENT}
        ) as server:
            server.start()
            server.wait_healthy()
            started = time.perf_counter()
            asyncio.run(write(server.base_url, texts))
            took_s = time.perf_counter() - started
            print(f"  wrote {len(texts)} memories in hybrid mode in {took_s:.0f} s")
            server.terminate()
        rerank = {"MEMORY_PLUGIN_SEARCH": "rerank"}  # INFO: the fill's log line
        with ServerProcess(data, Path(tmp) / "rerank.log", env=rerank, log_level="INFO") as server:
            server.start()
            server.wait_healthy()
            answers, took = asyncio.run(serve_meanwhile(server, texts))
            record = filled(server)
            server.terminate()
    print(
        f"  fill: {'did not finish' if took is None else f'{took:.0f} s after health ok'}; {record}"
    )
    for kind, label in (("search", "searches"), ("commit", "commits")):
        mine = [a for a in answers if a[0] == kind]
        ms = [a[2] * 1000 for a in mine] or [0.0]
        statuses = dict(sorted(Counter(a[1] for a in mine).items()))
        print(
            f"  {label} meanwhile: {statuses}; p50 {percentile(ms, 50):.0f} ms,"
            f" p99 {percentile(ms, 99):.0f} ms, max {max(ms):.0f} ms"
        )
    slow = sum(a[2] > DEADLINE_S or a[1] == 0 for a in answers)
    failed = sum(a[1] >= 500 for a in answers)
    ok = took is not None and not slow and not failed
    verdict = "met" if ok else "NOT met"
    print(f"  fill finished, no answer over 2 s, no 5xx: {verdict} ({slow} slow, {failed} 5xx)")


if __name__ == "__main__":
    main()
