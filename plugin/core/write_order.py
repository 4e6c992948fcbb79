"""Each namespace's write order: the place a new memory takes (docs/backends.md,
"Neighbours in the write order"): one per commit in the order commits arrive, counted in
this process from the newest stored memory's, read back on a namespace's first commit.
"""

from __future__ import annotations

import asyncio
from datetime import UTC
from datetime import datetime

from adapters.base import VectorBackend
from adapters.errors import StorageDamaged
from adapters.values import MemoryFilter

# Before every expiry: the read-back sees expired memories too (their places stay taken).
_BEFORE_ALL = datetime(1970, 1, 1, tzinfo=UTC)
_EVERYTHING = (MemoryFilter(_BEFORE_ALL, pinned=True), MemoryFilter(_BEFORE_ALL, pinned=False))


class WriteOrder:
    """The next place of each namespace this process has written to."""

    def __init__(self, backend: VectorBackend) -> None:
        self._backend = backend
        self._next: dict[str, int] = {}
        self._reading: dict[str, asyncio.Future[int]] = {}

    def started(self, namespace: str) -> None:
        """`namespace` was created anew: its first memory takes place 0."""
        self._next[namespace] = 0

    def forget(self, namespace: str) -> None:
        """`namespace` was deleted."""
        self._next.pop(namespace, None)

    async def take(self, namespace: str) -> int | None:
        """The next place in `namespace`'s write order, never given before in this process;
        None while the namespace cannot be read (damaged: writes go on, without a place)."""
        if namespace not in self._next:
            try:
                first = await asyncio.shield(self._read_back(namespace))
            except StorageDamaged:
                return None
            self._next.setdefault(namespace, first)
        place = self._next[namespace]
        self._next[namespace] = place + 1
        return place

    def _read_back(self, namespace: str) -> asyncio.Future[int]:
        """One read of the namespace's newest places, however many commits wait on it."""
        reading = self._reading.get(namespace)
        if reading is None:
            reading = self._reading[namespace] = asyncio.ensure_future(
                self._after_newest(namespace)
            )
            reading.add_done_callback(lambda done: self._read(namespace, done))
        return reading

    def _read(self, namespace: str, done: asyncio.Future[int]) -> None:
        self._reading.pop(namespace, None)
        if not done.cancelled():
            done.exception()  # retrieved: the waiters raise it, or none waits any more

    async def _after_newest(self, namespace: str) -> int:
        """One past the newest memory's place, pinned or not; 0 where none has one."""
        sides = await asyncio.gather(
            *(self._backend.list_memories([namespace], side, 1) for side in _EVERYTHING)
        )
        places = [m.position for side in sides for m in side if m.position is not None]
        return max(places, default=-1) + 1
