"""Closed-loop load of commits with ids, for benchmarks/latency.py's checks.

CALLERS callers (the Python client below, and wrk where installed) commit one
after another for CLOSED_LOOP_S seconds; each returns the commits per second.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from typing import Any

import aiohttp

from benchmarks.common import run_wrk
from benchmarks.common import wrk_post_script
from benchmarks.model import CALLERS

CLOSED_LOOP_S = 6.0


async def post_json(
    session: aiohttp.ClientSession, method: str, url: str, body: Any
) -> tuple[int, Any]:
    async with session.request(method, url, json=body) as response:
        return response.status, await response.read()


async def post_commit(session: aiohttp.ClientSession, url: str, text: str) -> tuple[int, Any]:
    body = {"content": text, "kind": "fact", "source": "agent", "id": str(uuid.uuid4())}
    return await post_json(session, "POST", url, body)


async def closed_loop(session: aiohttp.ClientSession, url: str, texts: list[str]) -> float:
    """CALLERS callers, each committing (with an id) again as soon as answered; commits/s."""
    done = 0
    failed = 0
    deadline = time.perf_counter() + CLOSED_LOOP_S

    async def caller(offset: int) -> None:
        nonlocal done, failed
        i = offset
        while time.perf_counter() < deadline:
            status, _ = await post_commit(session, url, texts[i % len(texts)])
            done, failed = done + (status == 201), failed + (status != 201)
            i += CALLERS

    started = time.perf_counter()
    await asyncio.gather(*(caller(k) for k in range(CALLERS)))
    if failed:
        print(f"  closed loop: {failed} answers other than 201")
    return done / (time.perf_counter() - started)


COMMIT_BODY = """string.format(
    '{"content":%%s,"kind":"fact","source":"agent","id":"7f3e2a10-0000-4000-8%03d-%%012d"}',
    texts[(n %% #texts) + 1], n)"""


def commit_script(texts: list[str], window: int) -> str:
    """wrk's request script: commits of `texts` in turn, with ids unique to `window`."""
    quoted = ",".join(f"[==[{json.dumps(text)}]==]" for text in texts)
    return wrk_post_script(COMMIT_BODY % window, setup=f"local texts = {{{quoted}}}\n")


def wrk_closed_loop(url: str, texts: list[str], window: int = 0) -> float | None:
    """The same closed loop driven by wrk (C, one thread), when installed; commits/s.

    The Python client above spends a good share of the two cores it shares with the
    server; wrk shows what the plugin does when the caller costs almost nothing.
    """
    if shutil.which("wrk") is None:
        return None
    rate, non_2xx = run_wrk(url, commit_script(texts, window), CALLERS, CLOSED_LOOP_S)
    if non_2xx is not None:
        print("  wrk: answers other than 2xx:", non_2xx)
    return rate
