"""What the embedded store's upkeep keeps of each shard's writes: `ShardWrites`.

Told by every write (store.py, `update`), read by the upkeep (upkeep.py) to choose when a shard
is flushed, vacuumed or reopened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import Literal

# What the janitor did to a shard since its last write.
Upkeep = Literal["flush", "vacuum"]


class ShardWrites:
    """What upkeep keeps of each shard's writes, told by every write (store.py, `update`).

    By the shard object (a reopened shard is another): when it was first written since its
    last flush and since its last vacuum (on `clock`), its writes since it was opened (a
    reopen is due after many), and every write it was ever given, never reset
    (`generation`: what it answers changes only with it); and the points written since the
    last vacuum round (`changes`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.changes = 0
        self._unsettled: dict[Upkeep, dict[int, float]] = {"flush": {}, "vacuum": {}}
        self._since_open: dict[int, int] = {}
        self._generations: dict[int, int] = {}

    def wrote(self, shard: Any) -> None:
        self.changes += 1
        key = id(shard)
        self._since_open[key] = self._since_open.get(key, 0) + 1
        self._generations[key] = self._generations.get(key, 0) + 1
        now = self._clock()
        for shards in self._unsettled.values():
            shards.setdefault(key, now)

    def written_at(self, shard: Any, since: Upkeep) -> float | None:
        """When `shard` was first written since its last `since`; None: not since."""
        return None if shard is None else self._unsettled[since].get(id(shard))

    def settled(self, shard: Any, since: Upkeep) -> None:
        self._unsettled[since].pop(id(shard), None)

    def generation(self, shard: Any) -> int:
        """How many writes `shard` has been given: what it answers changes only with it."""
        return self._generations.get(id(shard), 0)

    def since_open(self, shard: Any) -> int:
        return 0 if shard is None else self._since_open.get(id(shard), 0)

    def reopening(self, old: Any) -> float | None:
        """`old` is about to be loaded again: its writes count from zero (a reopen that
        fails is not retried at once); when its vacuum came due, if it had."""
        self._since_open.pop(id(old), None)
        return self._unsettled["vacuum"].get(id(old))

    def reopened(self, old: Any, new: Any, vacuum_due: float | None) -> None:
        """`old` was replaced by `new` (flushed by the reopen); a vacuum due stays due."""
        for shards in self._unsettled.values():
            shards.pop(id(old), None)
        if new is not None and vacuum_due is not None:
            self._unsettled["vacuum"][id(new)] = vacuum_due
