"""Which engine read goes to the worker next: tenant by tenant, a few at a time.

The engine serialises its calls (it holds the GIL), so whatever is sent to the
worker runs in the order it arrived there. The server therefore sends at most
`window` reads at once and keeps the rest here, a queue per caller (adapters/
callers.py: the request's tenant), served round robin: a tenant with one search
waiting goes next, however many another tenant has queued. Writes do not wait
here: their engine work is short and batched, and most of their time is the
group commit's sync, which the window must not hold up.
"""

from __future__ import annotations

import asyncio
from collections import deque

# Reads whose engine time grows with the namespaces they read.
WINDOWED = frozenset(
    {
        "query_memories",
        "list_memories",
        "get_stored_memory",
        "get_memory",
        "iter_memories",
        "unindexed_memories",
        "untokenized_memories",
        "verify",
    }
)


class EngineQueue:
    """At most `window` reads in flight; the others wait their caller's turn."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.in_flight = 0
        self._waiting: dict[str | None, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str | None] = deque()  # callers with a read waiting, in turn

    async def turn(self, caller: str | None) -> None:
        """Wait until a read for `caller` may be sent; `done()` when its answer came."""
        if self.in_flight < self.window and not self._turns:
            self.in_flight += 1
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if caller not in self._waiting:
            self._waiting[caller] = deque()
            self._turns.append(caller)
        self._waiting[caller].append(ready)
        try:
            await ready
        except asyncio.CancelledError:
            if ready.done() and not ready.cancelled():  # its turn came as it was cancelled
                self.done()
            raise

    def done(self) -> None:
        """A read's answer came (or it failed): the next caller's read may go."""
        self.in_flight -= 1
        while self.in_flight < self.window and self._turns:
            caller = self._turns.popleft()
            queue = self._waiting[caller]
            ready = queue.popleft()
            if queue:
                self._turns.append(caller)
            else:
                del self._waiting[caller]
            if not ready.done():  # a read given up while it waited is skipped
                self.in_flight += 1
                ready.set_result(None)

    def fail(self, error: BaseException) -> None:
        """The worker is gone: every read waiting fails with `error`."""
        for queue in self._waiting.values():
            for ready in queue:
                if not ready.done():
                    ready.set_exception(error)
        self._waiting.clear()
        self._turns.clear()

    def waiting(self) -> int:
        return sum(map(len, self._waiting.values()))
