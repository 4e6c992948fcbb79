"""Who a backend call is made for, so that a backend serialising its calls can take them
in turn, tenant by tenant, instead of first come, first served.

Admission makes one `Caller` per request (plugin/scheduling/admission.py): the
request's tenant, and a `Waiting` that says whether the request's work is waiting
its turn in one of the plugin's queues, for the request's deadline. The request
hands it, as a value, to the backend reads that may queue (`caller=`) and to the
model's queue (plugin/scheduling/work.py). A backend whose calls wait for one
shared resource (the embedded store's engine worker: adapters/worker/engine_process.py,
`EngineQueue`)
serves the callers waiting there in turn by it; others ignore it. `NOBODY`:
nobody in particular (start-up, the janitor, tools).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Protocol


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


@dataclass(frozen=True, slots=True)
class Caller:
    """Whom a call is for: `tenant` (None: nobody in particular), and where its request's
    work waits, if anywhere. It stays in the server process: queues are kept there."""

    tenant: str | None = None
    waiting: Waiting | None = field(default=None, compare=False)


NOBODY = Caller()
