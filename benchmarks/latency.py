"""Request latency of the real server on the embedded default (qdrant-edge), loopback.

Starts `memory-plugin-vector serve` as a child process (tests/server_process.py)
on a fresh data directory, prints its cold start (spawn to first 200 on
/v1/health), preloads 10,000 varied memories into one namespace through the
HTTP API (32 requests in flight, so the server's embedder batches them), then
times sequential requests from one client: commits, semantic searches (query
text, limit 20), listings (no query, limit 100), the namespace PUT the platform
sends before every write, and health. Client and server share the machine.

Run: python benchmarks/latency.py   (about 1-3 minutes on 2 cores)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from common import print_table, run_against_server, summary_ms, use_repo_root
from sentences import queries, sentences

use_repo_root()

from tests.server_process import ServerProcess  # noqa: E402

NAMESPACE = "workspace:bench-latency"
PRELOAD = 10_000
CONCURRENCY = 32
SAMPLES = 200
RETRIES = 5
TIMEOUT = aiohttp.ClientTimeout(total=10)


async def post_json(
    session: aiohttp.ClientSession, method: str, url: str, body: Any
) -> tuple[int, Any]:
    async with session.request(method, url, json=body) as response:
        return response.status, await response.read()


async def preload(session: aiohttp.ClientSession, base: str, texts: list[str]) -> dict[str, int]:
    """Commit every text with CONCURRENCY requests in flight; retry a non-201 a few times."""
    url = f"{base}/v1/namespaces/{NAMESPACE}/memories"
    pending = iter(texts)
    counts = {"ok": 0, "retried": 0, "failed": 0}
    statuses: dict[int, int] = {}

    async def worker() -> None:
        for text in pending:  # shared iterator: each text is taken by one worker
            body = {"content": text, "kind": "fact", "source": "agent", "id": str(uuid.uuid4())}
            for attempt in range(RETRIES):
                try:
                    status, reply = await post_json(session, "POST", url, body)
                except (aiohttp.ClientError, TimeoutError) as error:
                    status, reply = 0, repr(error).encode()
                if status == 201:
                    counts["ok"] += 1
                    break
                if status not in statuses:
                    print(f"  preload: first {status} answer: {reply[:200]!r}")
                statuses[status] = statuses.get(status, 0) + 1
                counts["retried"] += 1
                await asyncio.sleep(0.1 * (attempt + 1))
            else:
                counts["failed"] += 1

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    if statuses:
        print(f"  preload: retried statuses {statuses} (0 = transport error)")
    return counts


async def timed(
    count: int, make_call: Callable[[int], Awaitable[tuple[int, Any]]], expect: int
) -> tuple[list[float], int]:
    """Run `count` calls one after another; return durations and how many failed."""
    durations: list[float] = []
    failures = 0
    for i in range(count):
        started = time.perf_counter()
        status, _ = await make_call(i)
        durations.append(time.perf_counter() - started)
        failures += status != expect
    return durations, failures


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def measure(server: ServerProcess) -> None:
    base = server.base_url
    corpus = sentences(PRELOAD + SAMPLES)
    preload_texts, commit_texts = corpus[:PRELOAD], corpus[PRELOAD:]
    search_texts = queries(SAMPLES, exclude=set(corpus))
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        status, _ = await post_json(
            session, "PUT", f"{base}/v1/namespaces/{NAMESPACE}", {"kind": "workspace"}
        )
        if status != 200:
            raise RuntimeError(f"PUT namespace answered {status}")

        started = time.perf_counter()
        counts = await preload(session, base, preload_texts)
        took = time.perf_counter() - started
        print(
            f"preload: {counts['ok']} memories in {took:.1f} s ({counts['ok'] / took:.0f}/s, "
            f"{CONCURRENCY} in flight); {counts['retried']} retries, {counts['failed']} failed"
        )
        if server.proc is not None:
            print(f"server RSS after preload: {rss_mib(server.proc.pid) or 0:.0f} MiB")

        memories = f"{base}/v1/namespaces/{NAMESPACE}/memories"

        def commit(i: int) -> Awaitable[tuple[int, Any]]:
            body = {"content": commit_texts[i], "kind": "fact", "source": "agent"}
            return post_json(session, "POST", memories, body)

        def semantic(i: int) -> Awaitable[tuple[int, Any]]:
            body = {"namespaces": [NAMESPACE], "query": search_texts[i], "limit": 20}
            return post_json(session, "POST", f"{base}/v1/search", body)

        def listing(_: int) -> Awaitable[tuple[int, Any]]:
            body = {"namespaces": [NAMESPACE], "limit": 100}
            return post_json(session, "POST", f"{base}/v1/search", body)

        def put_namespace(_: int) -> Awaitable[tuple[int, Any]]:
            return post_json(
                session, "PUT", f"{base}/v1/namespaces/{NAMESPACE}", {"kind": "workspace"}
            )

        def health(_: int) -> Awaitable[tuple[int, Any]]:
            return post_json(session, "GET", f"{base}/v1/health", None)

        operations: list[tuple[str, Callable[[int], Awaitable[tuple[int, Any]]], int]] = [
            ("commit (POST memories)", commit, 201),
            ("semantic search (query, limit 20)", semantic, 200),
            ("listing search (no query, lim 100)", listing, 200),
            ("PUT namespace (unchanged)", put_namespace, 200),
            ("GET /v1/health", health, 200),
        ]
        rows = []
        failed = {}
        for name, call, expect in operations:
            await call(0)  # one warm-up call, not counted
            durations, failures = await timed(SAMPLES, call, expect)
            rows.append((name, SAMPLES, summary_ms(durations)))
            failed[name] = failures
        print()
        print_table(
            f"sequential requests, one client, {PRELOAD + SAMPLES:,} memories in the namespace:",
            rows,
        )
        if any(failed.values()):
            print(f"unexpected statuses: {failed}")


def main() -> None:
    run_against_server("latency.py: real server process, embedded qdrant-edge backend", measure)


if __name__ == "__main__":
    main()
