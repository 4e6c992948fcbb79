"""One call in flight at a time; callers that arrive while it runs share its outcome: a
burst of health checks makes one backend ping (docs/behaviour.md, "Health")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from collections.abc import Coroutine
from typing import Any


class SingleFlight:
    """`await flight()` runs `call()`, or joins the run already in flight."""

    def __init__(self, call: Callable[[], Coroutine[Any, Any, None]], join_within_s: float) -> None:
        self._call = call
        self._join_within_s = join_within_s
        self._running: asyncio.Task[None] | None = None
        self._started = 0.0

    async def __call__(self) -> None:
        now, running = time.monotonic(), self._running
        if running is None or running.done() or now - self._started >= self._join_within_s:
            running = self._running = asyncio.get_running_loop().create_task(self._call())
            running.add_done_callback(_retrieve)
            self._started = now
        # A caller that gives up (its deadline, a closed connection) leaves the call
        # running for the others.
        await asyncio.shield(running)


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark the outcome seen: every caller may have given up before it came."""
    if not task.cancelled():
        task.exception()
