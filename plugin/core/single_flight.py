"""One call in flight at a time; callers that arrive while it runs share its outcome.

Why: health is cheap for one caller, not for hundreds at once. A burst of health
checks (every caller's connection warming up together, probes stacking up behind a
slow disk) made as many backend pings, and on the embedded store each is a worker
thread's call: while any ran, the request path's engine calls queued behind it on
worker threads too (adapters/qdrant/edge/engine_calls.py), where they fought the event
loop for the GIL and held every refusal up.
Callers arriving meanwhile learn what the call in flight learns; the next caller
after it has finished starts a fresh one, so nothing is served stale. Nor is a call
joined once it has run `join_within_s`: its first callers have given up on it by
then, and a check that never returns must not keep health unavailable after the
backend is back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any


class SingleFlight:
    """`await flight()` runs `call()`, or joins the run already in flight."""

    def __init__(self, call: Callable[[], Coroutine[Any, Any, None]], join_within_s: float) -> None:
        self._call = call
        self._join_within_s = join_within_s
        self._running: asyncio.Task[None] | None = None
        self._started = 0.0

    async def __call__(self) -> None:
        now = time.monotonic()
        if (
            self._running is None
            or self._running.done()
            or now - self._started >= self._join_within_s
        ):
            self._running = asyncio.get_running_loop().create_task(self._call())
            self._running.add_done_callback(_retrieve)
            self._started = now
        # A caller that gives up (its deadline, a closed connection) leaves the call
        # running for the others.
        await asyncio.shield(self._running)


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark the outcome seen: every caller may have given up before it came."""
    if not task.cancelled():
        task.exception()
