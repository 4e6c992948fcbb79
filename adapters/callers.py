"""Who a backend call is made for, so that a backend serialising its calls can take them
in turn, tenant by tenant, instead of first come, first served.

The plugin sets `current_caller` once per request, to the request's tenant
(plugin/scheduling/admission.py); as a context variable it follows the request's
task into every backend call it makes. A backend whose calls wait for one shared
resource (the embedded store's engine worker: qdrant/edge/engine_queue.py)
serves the callers waiting there in turn by it. None: nobody in particular
(start-up, the janitor, tools).

`current_waiting`, set beside it, says whether the request's work is waiting its
turn in one of those queues (or the model's), for the request's deadline.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

current_caller: ContextVar[str | None] = ContextVar("current_caller", default=None)


class Queue(Protocol):
    """A queue of the plugin's own where work waits for its turn."""

    @property
    def served(self) -> int:
        """How much work it has let through and seen finish, since it was made."""
        ...


@dataclass(slots=True)
class Waiting:
    """Where the current request's work waits for its turn, if it does.

    A queue sets it (`joined`) when the work joins it and clears it (`left`) when the
    work's turn comes or the queue fails it; work cancelled while it waits (its
    request ran out of time) leaves it set. So when a request's deadline passes, the
    plugin can tell a request that was still waiting behind others' work, served as
    it waited (the plugin is full: answered 429, which the platform's breaker ignores),
    from one whose work was under way or whose queue stood still (something is stuck:
    503)."""

    queue: Queue | None = None
    served_before: int = 0

    def joined(self, queue: Queue) -> None:
        self.queue, self.served_before = queue, queue.served

    def left(self) -> None:
        self.queue = None

    def behind_others(self) -> bool:
        """Still waiting in a queue that has served others since it joined."""
        return self.queue is not None and self.queue.served > self.served_before


current_waiting: ContextVar[Waiting | None] = ContextVar("current_waiting", default=None)
