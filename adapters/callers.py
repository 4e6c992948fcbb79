"""Who a backend call is for, so a backend serialising its calls takes them tenant by tenant.

Admission acts for one `Caller` per request (`acting_for`); the engine workers' read queue
reads it there (`current_caller`), and the model's queue is handed its `Waiting`. See
docs/behaviour.md, "Fair sharing".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from dataclasses import field
from typing import Protocol

from adapters.errors import BackendUnavailable


class Queue(Protocol):
    """A queue of the plugin's own where work waits for its turn."""

    @property
    def served(self) -> int:
        """How much work it has let through and seen finish, since it was made."""


@dataclass(slots=True)
class Waiting:
    """Where the current request's work waits for its turn, if it does.

    A queue sets it (`joined`) when the work joins and clears it (`left`) when its turn
    comes or the queue fails it; work cancelled while it waits leaves it set. So at a
    request's deadline the plugin tells one still waiting behind others' work, served as it
    waited (the plugin is full: 429, which the platform's breaker ignores), from one whose
    work was under way or whose queue stood still (something is stuck: 503)."""

    queue: Queue | None = None
    served_before: int = 0
    # When the request's time runs out, on the event loop's clock (None: never); a queue
    # refuses work whose turn comes too late to finish by then (`TooLate`).
    deadline: float | None = None

    def joined(self, queue: Queue) -> None:
        self.queue, self.served_before = queue, queue.served

    def left(self) -> None:
        self.queue = None

    def behind_others(self) -> bool:
        """Still waiting in a queue that has served others since it joined."""
        return self.queue is not None and self.queue.served > self.served_before


class TooLate(BackendUnavailable):
    """Work refused when its turn came, too late to finish in its request's time: the queue
    served others meanwhile, so the plugin is full, not broken (admission answers 429)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Whom a call is for: `tenant` (None: nobody in particular), and where its request's
    work waits, if anywhere. It stays in the server process: queues are kept there."""

    tenant: str | None = None
    waiting: Waiting | None = field(default=None, compare=False)


NOBODY = Caller()

_CURRENT: ContextVar[Caller] = ContextVar("caller", default=NOBODY)


def current_caller() -> Caller:
    """Whom the backend calls made now are for: the request's, or `NOBODY` outside one."""
    return _CURRENT.get()


@contextmanager
def acting_for(caller: Caller) -> Iterator[None]:
    """The calls made in the block, and in the tasks it starts, are for `caller`."""
    token = _CURRENT.set(caller)
    try:
        yield
    finally:
        _CURRENT.reset(token)
