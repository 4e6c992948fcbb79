"""A queue per tenant, served in turn: one tenant's backlog never delays another's item.

Deficit round robin with a quantum of one item (every item is one text for the
model, and texts are clipped to what the model reads, so items cost about the same),
and FQ-CoDel's rule for sparse flows (RFC 8290, section 4.1): a tenant that had
nothing queued goes to the `_new` list, served before the tenants of the `_old`
list. So a tenant with one item waiting is served next, whatever another tenant has
queued; a tenant that keeps a backlog is served once per round with the others.
After its turn a tenant goes to the back of the old list even when it has nothing
left, and is forgotten only when its turn comes round with nothing queued: a tenant
that sends again at once is not new again, so it cannot jump the queue forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Items by tenant; `pop` takes the next item in fair order."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[T]] = {}
        self._new: deque[str] = deque()  # tenants that had nothing queued
        self._old: deque[str] = deque()  # tenants with a backlog, in turn
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def tenants(self) -> int:
        """How many tenants have something queued."""
        return sum(1 for queue in self._queues.values() if queue)

    def push(self, tenant: str, item: T) -> None:
        queue = self._queues.get(tenant)
        if queue is None:
            queue = self._queues[tenant] = deque()
            self._new.append(tenant)
        queue.append(item)
        self._size += 1

    def pop(self) -> T:
        """The next item in fair order; IndexError when empty."""
        if not self._size:
            raise IndexError("pop from an empty FairQueue")
        while True:
            tenant = self._new.popleft() if self._new else self._old.popleft()
            queue = self._queues[tenant]
            if queue:
                self._old.append(tenant)
                self._size -= 1
                return queue.popleft()
            del self._queues[tenant]  # its turn came round with nothing queued

    def take(self, count: int, live: Callable[[T], bool] = lambda _: True) -> list[T]:
        """Up to `count` live items in fair order; dead ones (`live` false) are dropped."""
        taken: list[T] = []
        while self._size and len(taken) < count:
            item = self.pop()
            if live(item):
                taken.append(item)
        return taken

    def drain(self) -> Iterator[T]:
        """Every item left, emptying the queue (at shutdown)."""
        while self._size:
            yield self.pop()
