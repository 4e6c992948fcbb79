"""The plugin's own cost per commit, with the model taken out.

Under 8 closed-loop callers the model idles while the plugin handles the 8
requests of the last batch (their upsert, replies, log lines, the next 8
requests): that serial gap is what keeps `latency.py`'s ratio under 1. Its size
is the plugin's CPU per request, which this measures without the model's noise:
the real server (aiohttp, middleware, service, the embedded qdrant-edge store,
metrics, the JSON log line at INFO) runs in a child process with a stand-in
encoder that returns a fixed unit vector at once, and wrk (8 connections, one
thread) commits with ids, as the backfill does, in ROUNDS windows. The event
loop is then the bottleneck, so 1 / (commits/s) is the plugin's time per commit.

Needs Debian's `wrk`. Run: python -m benchmarks.overhead   (about 1 minute)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
from collections.abc import Awaitable
from collections.abc import Callable

import aiohttp

from benchmarks.common import run_against_server
from benchmarks.common import run_wrk
from benchmarks.common import wrk_post_script
from harness.server_process import ServerProcess
from plugin.embedding.embedding_tokens import Embedding

ROUNDS = 5
WINDOW_S = 6
CALLERS = 8
NAMESPACE = "workspace:overhead"
DIMENSION = 384
WRK_SCRIPT = wrk_post_script("""string.format(
    '{"content":"memory %d: the deploy window moved to thursday","kind":"fact",'
    .. '"source":"agent","id":"7f3e2a10-0000-4000-8000-%012d"}', n, n)""")


class InstantEncoder:
    """An `Encoder` that costs nothing: one fixed unit vector for every text."""

    dimension = DIMENSION
    token_dimension = DIMENSION  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "all-MiniLM-L6-v2/onnx"  # what a default store records
    parallelism = 1
    inline_lone_text = True  # as the ONNX encoders it stands in for

    def __init__(self) -> None:
        self._vector = [1.0 / DIMENSION**0.5] * DIMENSION

    def encode(self, texts: list[str]) -> list[list[float]]:
        return [list(self._vector) for _ in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        return [Embedding(vector) for vector in self.encode(texts)]

    embed_lone = embed


def serve() -> None:
    """The child: `memory-plugin-vector serve`, with the instant encoder handed in."""
    from plugin.commands.serve import run_app
    from plugin.http.app import create_app
    from plugin.observability import logs
    from plugin.settings import Settings

    settings = Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    host, port = settings.listen
    asyncio.run(run_app(create_app(settings, encoder=InstantEncoder()), host, port))


def measure(log_level: str) -> Callable[[ServerProcess], Awaitable[None]]:
    async def run(server: ServerProcess) -> None:
        async with aiohttp.ClientSession() as session:
            put = f"{server.base_url}/v1/namespaces/{NAMESPACE}"
            async with session.put(put, json={"kind": "workspace"}) as reply:
                if reply.status != 200:
                    raise RuntimeError(f"PUT namespace answered {reply.status}")
        url = f"{server.base_url}/v1/namespaces/{NAMESPACE}/memories"
        window(url, 2)  # warm-up, not counted
        rates = [window(url, WINDOW_S) for _ in range(ROUNDS)]
        print(f"  {CALLERS} wrk callers committing with ids, log level {log_level},")
        print(f"  {ROUNDS} windows of {WINDOW_S} s: " + ", ".join(f"{r:.0f}" for r in rates) + "/s")
        median = statistics.median(rates)
        print(f"  median {median:.0f} commits/s = {1e6 / median:.0f} us of plugin per commit")

    return run


def window(url: str, seconds: float) -> float:
    """Commits/s for one wrk window; every answer must be a 2xx."""
    rate, non_2xx = run_wrk(url, WRK_SCRIPT, CALLERS, seconds)
    if non_2xx is not None or rate is None:
        raise RuntimeError(f"wrk: answers other than 2xx: {non_2xx}; rate {rate}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default="INFO", help="the server's (default: INFO)")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if shutil.which("wrk") is None:
        sys.exit("overhead.py needs wrk (apt-get install wrk)")
    run_against_server(
        "overhead.py: real server, instant encoder, embedded store",
        measure(args.log_level),
        {"MEMORY_PLUGIN_LOG_LEVEL": args.log_level},
        command=[sys.executable, "-m", "benchmarks.overhead", "--serve"],
    )


if __name__ == "__main__":
    main()
