"""A queue per tenant, served in turn: one tenant's backlog never delays another's item.
Deficit round robin, one item a turn, with FQ-CoDel's rule for sparse flows (RFC 8290, 4.1);
an `overdue` item goes first. See docs/behaviour.md, "Fair sharing"."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from collections.abc import Iterator
from typing import Generic
from typing import TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Items by tenant; `pop` takes the next item in fair order, an overdue one first."""

    def __init__(self, overdue: Callable[[T], bool] | None = None) -> None:
        self._queues: dict[str, deque[tuple[int, T]]] = {}  # (arrival number, item)
        self._new: deque[str] = deque()  # tenants that had nothing queued
        self._old: deque[str] = deque()  # tenants with a backlog, in turn
        self._size = 0
        self._overdue = overdue
        # (arrival number, tenant) of every item in arrival order, while `overdue` is
        # set; those taken in fair order meanwhile are skipped when they come first.
        self._arrivals: deque[tuple[int, str]] = deque()
        self._arrived = 0

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
        self._arrived += 1
        queue.append((self._arrived, item))
        if self._overdue is not None:
            self._arrivals.append((self._arrived, tenant))
        self._size += 1

    def pop(self) -> T:
        """The next item in fair order; IndexError when empty."""
        if not self._size:
            raise IndexError("pop from an empty FairQueue")
        late = self._oldest_overdue()
        if late is not None:
            self._size -= 1
            return late
        while True:
            tenant = self._new.popleft() if self._new else self._old.popleft()
            queue = self._queues[tenant]
            if queue:
                self._old.append(tenant)
                self._size -= 1
                return queue.popleft()[1]
            del self._queues[tenant]  # its turn came round with nothing queued

    def _oldest_overdue(self) -> T | None:
        """The oldest item, taken out of its tenant's queue, if it is overdue."""
        while self._overdue is not None and self._arrivals:
            number, tenant = self._arrivals[0]
            queue = self._queues.get(tenant)
            if not queue or queue[0][0] != number:  # taken in fair order already
                self._arrivals.popleft()
                continue
            if not self._overdue(queue[0][1]):
                return None
            self._arrivals.popleft()
            return queue.popleft()[1]
        return None

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
        self._arrivals.clear()
        for queue in self._queues.values():
            while queue:
                self._size -= 1
                yield queue.popleft()[1]
        self._queues.clear()
        self._new.clear()
        self._old.clear()
