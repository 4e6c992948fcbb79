"""Which engine read goes to the worker next: tenant by tenant, a few at a time.

The engine worker serialises its calls, so what it is sent runs in the order it arrived. The
server therefore sends only a little engine time at once and keeps the rest here, a queue per
caller (adapters/callers.py: the request's tenant, handed to the read). The next read is the
caller's that has had the least engine time (start-time fair queuing: a read starts at its
caller's last finish, or now if later), so a tenant with one search waiting goes next
however many another has queued. Each caller's reads are expected to cost what its last
ones cost in the worker (a moving average); reads go while those in flight add up to at
most `budget_s` (and `most`), one at least. Only the reads declared `queued` wait here
(adapters/crossings.py); writes do not: their engine work is short and batched. See
docs/backends.md, "The engine worker process".
"""

from __future__ import annotations

import asyncio
from collections import deque

from adapters.callers import Caller

# The weight of the latest read in a caller's moving average of its reads' cost.
SMOOTHING = 0.2
FIRST_GUESS_S = 0.001  # a caller not seen yet: a small read
FORGET_AFTER = 1024  # callers remembered before those with nothing pending are dropped


class EngineQueue:
    """Reads in flight up to `budget_s` of expected engine time (and at most `most`)."""

    def __init__(self, budget_s: float, most: int) -> None:
        self.budget_s = budget_s
        self.most = most
        self.in_flight = 0
        self.served = 0  # reads answered (adapters/callers.py, `Waiting`)
        self.load_s = 0.0  # the expected engine time of the reads in flight
        self._cost: dict[str | None, float] = {}
        self._waiting: dict[str | None, deque[asyncio.Future[float]]] = {}
        self._now = 0.0  # virtual time: the start of the read sent last
        self._finish: dict[str | None, float] = {}  # each caller's last read's finish

    def expected(self, caller: str | None) -> float:
        return self._cost.get(caller, FIRST_GUESS_S)

    def _fits(self, caller: str | None) -> bool:
        if self.in_flight == 0:
            return True
        fits = self.load_s + self.expected(caller) <= self.budget_s
        return fits and self.in_flight < self.most

    def _start(self, caller: str | None) -> float:
        return max(self._finish.get(caller, 0.0), self._now)

    def _take(self, caller: str | None) -> float:
        expected = self.expected(caller)
        self._now = self._start(caller)
        self._finish[caller] = self._now + expected
        self.in_flight += 1
        self.load_s += expected
        return expected

    async def turn(self, for_whom: Caller) -> float:
        """Wait until a read for `for_whom` may be sent; the cost it is expected to have,
        to be handed to `done()` with the cost it had once its answer came."""
        caller = for_whom.tenant
        if not self._waiting and self._fits(caller):
            return self._take(caller)
        ready: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(caller, deque()).append(ready)
        waiting = for_whom.waiting
        if waiting is not None:
            waiting.joined(self)
        try:
            expected = await ready
        except asyncio.CancelledError:  # its request ran out of time: it is left waiting
            if ready.done() and not ready.cancelled():  # its turn came as it was cancelled
                self.done(caller, ready.result(), None)
            raise
        except BaseException:
            if waiting is not None:
                waiting.left()
            raise
        if waiting is not None:
            waiting.left()
        return expected

    def done(self, caller: str | None, expected: float, took_s: float | None) -> None:
        """A read's answer came (`took_s` in the worker; None: it failed): the next go."""
        self.in_flight -= 1
        self.load_s = max(0.0, self.load_s - expected)
        if took_s is not None:
            self.served += 1
            self._cost[caller] = expected + SMOOTHING * (took_s - expected)
        while self._waiting:
            caller = min(self._waiting, key=self._start)
            if not self._fits(caller):
                return
            queue = self._waiting[caller]
            ready = queue.popleft()
            if not queue:
                del self._waiting[caller]
            if not ready.done():  # a read given up while it waited is skipped
                ready.set_result(self._take(caller))
        if not self.in_flight:  # idle: nobody's past reads count against them
            self._finish.clear()
        elif len(self._finish) > FORGET_AFTER:  # callers whose reads are all in the past
            self._finish = {c: f for c, f in self._finish.items() if f > self._now}

    def fail(self, error: BaseException) -> None:
        """The worker is gone: every read waiting fails with `error`."""
        for queue in self._waiting.values():
            for ready in queue:
                if not ready.done():
                    ready.set_exception(error)
        self._waiting.clear()

    def waiting(self) -> int:
        return sum(map(len, self._waiting.values()))
