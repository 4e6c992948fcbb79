"""Engine calls on the event loop take turns: a slice of engine time per loop iteration.

qdrant-edge holds the GIL through a call, and the request path's short calls run
on the event loop itself (dispatch.py). Under a search flood many searches get
their query vector in the same moment and, each running its engine call as soon
as it resumes, filled one loop iteration with dozens of calls: the loop polled
its sockets only between iterations, so a request that would have been refused
at once (429, plugin/scheduling/admission.py) waited behind all of them.

So the loop spends about `slice_s` of engine time in one iteration. A call that
finds the slice spent, or others already waiting, waits for a later iteration:
each iteration, after the loop has polled its sockets again, as many waiting
calls go as the slice holds at the calls' typical duration (a moving average),
one at least. Waking one a turn instead made the loop's own iterations the limit
on engine calls a second. A caller alone (nothing spent in this iteration) never
waits. The woken calls run in the iteration after the turn that woke them, and are
counted against it: the next turn goes ahead of them in the ready queue, so a
caller arriving behind a woken long call waits rather than running beside it.

Waiting calls go round robin by caller (adapters/callers.py: the request's
tenant), each caller's in arrival order: a tenant with one search waiting goes in
the next turn, however many another tenant's flood has queued before it (issue
27: what serialises is shared fairly, not first come, first served).
"""

from __future__ import annotations

import asyncio
from collections import deque

from adapters.callers import current_caller

# The weight of the latest call in the moving average of a call's duration.
SMOOTHING = 0.1


class LoopTurns:
    """Who may call the engine on the event loop now, and who waits for a later iteration."""

    def __init__(self, slice_s: float) -> None:
        self.slice_s = slice_s
        self._spent_s = 0.0  # engine time spent in the current iteration
        self.typical_s = slice_s / 4  # a call's duration, a moving average
        # per caller, its waiting calls in arrival order; callers in the order they are next
        self._waiting: dict[str | None, deque[asyncio.Future[None]]] = {}
        self._turn_scheduled = False

    @property
    def waiting(self) -> int:
        return sum(1 for turns in self._waiting.values() for turn in turns if not turn.done())

    async def take(self) -> None:
        """Return when this call may run: at once while the iteration's slice is not
        spent and nobody waits, else in a later iteration, its caller's turn."""
        if self._spent_s < self.slice_s and not self._waiting:
            return
        loop = asyncio.get_running_loop()
        turn = loop.create_future()
        self._waiting.setdefault(current_caller.get(), deque()).append(turn)
        self._schedule(loop)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # woken, then cancelled: pass it on
                self._schedule(loop)
            raise

    def spent(self, seconds: float) -> None:
        """Count `seconds` of engine time against the current iteration."""
        self._spent_s += seconds
        if seconds > 0:
            self.typical_s += (seconds - self.typical_s) * SMOOTHING
        self._schedule(asyncio.get_running_loop())

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """A new iteration's turn, once: `call_soon` from within an iteration runs in the
        next one, after the loop has polled its sockets."""
        if not self._turn_scheduled:
            self._turn_scheduled = True
            loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._turn_scheduled = False
        self._spent_s = 0.0
        if self._waiting:
            # The next turn goes ahead of the calls this one wakes: it then counts them
            # against their own iteration (they run in the next one). Scheduled after
            # them, it cleared their time from the count as they ran, and a caller
            # arriving after it found nothing spent: two long calls an iteration.
            self._schedule(asyncio.get_running_loop())
        room = self.slice_s
        while self._waiting and room > 0:
            caller, turns = next(iter(self._waiting.items()))
            turn = turns.popleft()
            del self._waiting[caller]  # served: to the back of the round, if it has more
            if turns:
                self._waiting[caller] = turns
            if not turn.done():  # a cancelled waiter's turn goes to the next one
                turn.set_result(None)
                room -= self.typical_s
