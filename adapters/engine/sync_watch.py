"""What health, the metrics and the writes know of the group commit's syncs (log_sync.py).

A stalled disk holds the writes behind its sync while reads go on: new writes are refused before
they reach the engine (`admit`), health names a sync waiting past the writes' deadline
(`problem`), the metrics time syncs and count refused writes (`state`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.errors import BackendUnavailable
from adapters.values import DISK_REFUSALS
from adapters.values import SYNC_BUCKETS
from adapters.values import DiskWrites


class SyncWatch:
    """The syncs as health and the metrics see them: the oldest pending, the last outcome,
    each one's time, and the writes the disk refused. Set on the store's event loop (the
    group commit's); `admit` and `refuse` from any thread."""

    def __init__(self, stalled_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stalled_after_s = stalled_after_s  # a sync waiting longer: the disk has stalled
        self.clock = clock
        self.asked_at: float | None = None  # when the sync under way was first asked for
        self.failure: str | None = None  # why the last sync failed; None once one completed
        self._buckets = [0] * (len(SYNC_BUCKETS) + 1)
        self._seconds = 0.0
        self._refused = dict.fromkeys(DISK_REFUSALS, 0)
        self._lock = threading.Lock()

    def waiting_s(self) -> float:
        """How long the sync under way has waited since it was first asked for; 0: none."""
        asked_at = self.asked_at  # once: a write's thread asks while the loop sets it
        return 0.0 if asked_at is None else max(0.0, self.clock() - asked_at)

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Time the sync (one that writes something) the block runs, if it completes."""
        started = self.clock()
        yield
        seconds = self.clock() - started
        for index, bound in enumerate(SYNC_BUCKETS):
            self._buckets[index] += seconds <= bound
        self._buckets[-1] += 1
        self._seconds += seconds

    def stalled(self) -> bool:
        """The sync under way has waited more than `stalled_after_s`: the disk has stalled."""
        return self.waiting_s() > self.stalled_after_s

    def admit(self) -> None:
        """Refuse a write (`BackendUnavailable`, counted) while the disk has stalled: the
        engine holds the GIL through a write, and one that fills its log's segment waits on the
        disk for the next, stopping the process, reads and all (docs/backends.md, "Durability")."""
        if self.stalled():
            waited = self.waiting_s()
            self.refuse("disk_stalled")
            raise BackendUnavailable(
                f"writes cannot reach the disk: a sync of the data volume has waited"
                f" {waited:.1f} s; writes are refused until it completes (reads are served)"
            )

    def refuse(self, reason: str) -> None:
        with self._lock:
            self._refused[reason] += 1

    def problem(self, deadline_s: float) -> str | None:
        """Health's line while writes cannot reach the disk: the sync under way has waited
        past the writes' deadline, or the last sync failed; None once a sync completes."""
        waited = self.waiting_s()
        if waited > deadline_s:
            return (
                f"writes cannot reach the disk: a sync of the data volume has waited {waited:.1f} s"
                f" (writes answer 503 after {deadline_s:g} s until it completes; reads are served)"
            )
        if self.failure is not None:
            return (
                f"writes cannot reach the disk: the last sync of the data volume failed"
                f" ({self.failure}); writes answer 503 until a sync completes"
            )
        return None

    def state(self, volume_full: int) -> DiskWrites:
        """For the metrics, with the writes the disk guard refused (`volume_full`)."""
        with self._lock:
            refused = self._refused | {"volume_full": volume_full}
        return DiskWrites(
            self.waiting_s(),
            tuple(self._buckets),
            self._seconds,
            tuple(refused[reason] for reason in DISK_REFUSALS),
        )
