"""Group commit: a write is answered once what it changed is on disk, one sync for many.

Under `sync` durability each write awaits `GroupCommit.durable()`: one sync `fsync`s the logs
written, then stores the counts held back. See docs/backends.md, "Durability".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from adapters.disk import fsync_path
from adapters.engine.call_batcher import CallBatcher
from adapters.engine.record_store import RecordStore
from adapters.engine.sync_watch import SyncWatch
from adapters.errors import BackendError

log = logging.getLogger(__name__)
WAL_DIR = "wal"  # a shard's write-ahead log, one file per segment
_OPEN_SEGMENT = "open-"  # the lowest-numbered is written; the others wait, empty
_CLOSED_SEGMENT = "closed-"  # a segment the engine writes no more: synced once
_FIRST_INDEX = "first-index"  # where replay starts: rewritten when the log is cut
_MAKING = "tmp-"  # a segment the engine is making, on a thread of its own
# After a roll, how long a sync waits for the engine's next segment made (a healthy disk
# takes milliseconds), and how often it looks.
SPARE_WAIT_S, SPARE_POLL_S = 1.0, 0.002


@dataclass(slots=True)
class Pending:
    """What one sync makes durable: shard directories written, and count changes."""

    shards: set[Path] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)


class LogSync:
    """The blocking half: which shards were written, and syncing them (`write_logs`)."""

    def __init__(self, records: RecordStore, fsync: Callable[[int], None] = os.fsync) -> None:
        self._records = records
        self.fsync = fsync  # a test records the calls
        self._lock = threading.Lock()
        self._written: set[Path] = set()
        self._files: dict[Path, dict[str, int]] = {}  # each log's open descriptors, by name
        self._closed_synced: dict[Path, set[str]] = {}  # each log's closed segments synced
        self._dirs_synced: set[Path] = set()
        self._listed: dict[Path, set[str]] = {}  # each log's files at its last sync
        self._first_index: dict[Path, tuple[int, int, int]] = {}  # its inode, size, mtime

    def mark(self, shard_dir: Path) -> None:
        """The shard at `shard_dir` was written (any thread; under `async` too, for the
        syncs that run whatever the durability)."""
        with self._lock:
            self._written.add(shard_dir)

    def take(self) -> Pending:
        """What has been written so far, for one sync. Counts first: a count is held
        only after its shard was marked, so every shard a taken count needs is taken."""
        counts = self._records.count_store.take_held()
        with self._lock:
            shards, self._written = self._written, set()
        return Pending(shards, counts)

    def give_back(self, pending: Pending) -> None:
        """A sync of `pending` failed: the next one takes it again."""
        with self._lock:
            self._written |= pending.shards
        self._records.count_store.hold(pending.counts)

    def write_logs(self, pending: Pending) -> None:
        """Sync the logs of `pending.shards`: what the writes are answered for."""
        for shard_dir in sorted(pending.shards):
            self._sync_log(shard_dir / WAL_DIR)
            if shard_dir not in self._dirs_synced:  # a new shard's entries up to the store
                self._sync_dir(shard_dir)
                self._sync_dir(shard_dir.parent)
                self._dirs_synced.add(shard_dir)

    def write_counts(self, counts: dict[str, int]) -> None:
        """The counts of writes whose logs are synced, written after their answers: a count
        is never on disk ahead of its memories, and one lost to a crash here is behind them,
        which the next check recounts (integrity.py). Failed, they are held for the next."""
        try:
            self._records.count_store.write(counts)
        except Exception as error:
            log.warning("memory counts not written (%s); the next sync writes them", error)
            self._records.count_store.hold(counts)

    def _sync_log(self, wal: Path) -> None:
        names = self._spare_made(wal)
        files = self._files.setdefault(wal, {})
        for name in [name for name in files if name not in names]:
            os.close(files.pop(name))  # a segment renamed or removed by the engine
        closed = self._closed_synced.setdefault(wal, set())
        closed &= names  # segments the engine removed are not named again
        for name in _written_files(names, wal, closed, self._first_index):
            fd = files.get(name)
            if fd is None:
                try:
                    fd = os.open(wal / name, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:  # renamed or removed meanwhile: not ours to sync
                    continue
                files[name] = fd
            self.fsync(fd)
            if name.startswith(_CLOSED_SEGMENT):
                closed.add(name)
                os.close(files.pop(name))
        if names != self._listed.get(wal):  # a segment created or renamed: its entry too
            self._sync_dir(wal)
            self._listed[wal] = names

    def _spare_made(self, wal: Path) -> set[str]:
        """The log's files, once the engine has made the segment it writes next (or after
        SPARE_WAIT_S): a roll makes it on a thread of the engine's, and the roll after waits
        for that thread, holding the GIL. A sync done with it ready, a write let in after
        the sync (`GroupCommit.writing`) does not meet the disk."""
        deadline = time.monotonic() + SPARE_WAIT_S
        while True:
            names = set(os.listdir(wal))
            spares = sum(name.startswith(_OPEN_SEGMENT) for name in names)
            making = any(name.startswith(_MAKING) for name in names)
            if (spares >= 2 and not making) or time.monotonic() > deadline:
                return names
            time.sleep(SPARE_POLL_S)

    def _sync_dir(self, path: Path) -> None:
        fsync_path(path, self.fsync)

    def close(self) -> None:
        for files in self._files.values():
            for fd in files.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._files.clear()


class GroupCommit:
    """`durable()` returns once everything written before it was called is on disk.

    The callers are batched (`CallBatcher`): the first starts a
    sync at once, and those arriving while it runs share the next one. `sync` runs
    one sync (take, then write); a failure goes to every caller it covered, and the
    next caller starts a new one. A caller that gives up waiting (its deadline) leaves
    the sync to run on: the disk has it, and the next callers need it done.

    Under `sync`, writes go to the engine between syncs (`writing`), never while one runs:
    the engine holds the GIL through a write, and a write that rolls its log over on a disk
    that stopped answering would stop the whole worker, reads and all. A sync waits for the
    writes in the engine; writes arriving meanwhile wait for it."""

    def __init__(
        self,
        sync: Callable[[], Awaitable[None]],
        *,
        enabled: bool,
        stalled_after_s: float,
        gate: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sync = sync
        self.enabled = enabled
        self.watch = SyncWatch(stalled_after_s, clock)
        self._callers: CallBatcher[float, None] = CallBatcher(self._sync_for)
        self._retry: asyncio.Task[None] | None = None
        self._between = asyncio.Event()  # set while no sync runs or waits to run
        self._between.set()
        self._writing = 0  # writes in the engine (`writing`)
        self._written = asyncio.Event()  # set while none is
        self._written.set()
        # The store's write gate (store.py, `EdgeStore.admit`); alone, the disk's syncs.
        self._gate = self.watch.admit if gate is None else gate

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Under `sync`: the block (a write to the engine) runs between syncs; refused at
        once by the write gate while it waits (a sync under way that has stalled)."""
        if not self.enabled:
            yield
            return
        while not self._between.is_set():
            self._gate()
            await self._between.wait()
        self._writing += 1
        self._written.clear()
        try:
            yield
        finally:
            self._writing -= 1
            if not self._writing:
                self._written.set()

    async def durable(self, *, always: bool = False) -> None:
        """A no-op under `async` unless `always` (a purge, a store-wide fact)."""
        if not (self.enabled or always):
            return
        try:
            await self._callers.submit(self.watch.clock())
        except asyncio.CancelledError:  # its deadline passed while the sync ran
            self.watch.refuse("sync_timeout")
            raise
        except BackendError:
            self.watch.refuse("sync_failed")
            raise

    def retry(self) -> None:
        """After a failed sync, another in the background (health asks for it), so that
        the store recovers without waiting for a write to ask."""
        idle = self._retry is None or self._retry.done()
        if self.watch.failure is not None and self.watch.asked_at is None and idle:
            self._retry = asyncio.create_task(self._retried(), name="sync retried")

    async def _retried(self) -> None:
        with contextlib.suppress(BackendError):
            await self._callers.submit(self.watch.clock())

    async def drain(self) -> None:
        """Wait for the sync under way and those queued behind it (at close)."""
        await self._callers.drain()

    async def _sync_for(self, asked: list[float]) -> list[None]:
        watch = self.watch
        watch.asked_at = min(asked)
        await asyncio.sleep(0)  # the writes woken as the last sync ended go to the engine first
        self._between.clear()
        try:
            await self._written.wait()  # the writes in the engine first: this sync has them
            await self._sync()
        except Exception as error:
            watch.failure = str(error) or type(error).__name__
            raise
        else:
            watch.failure = None
        finally:
            watch.asked_at = None
            self._between.set()
        return [None] * len(asked)


def _written_files(
    names: set[str],
    wal: Path,
    closed_synced: set[str],
    first_index: dict[Path, tuple[int, int, int]],
) -> list[str]:
    """The files of a log that may hold writes not yet synced.

    The engine appends to the lowest-numbered `open-N` segment only (the others
    are made ahead, empty); a full one is renamed `closed-<index>` and written no
    more, so each closed segment is synced once; `first-index` is rewritten (not
    mapped) when the log is cut, so its inode, size and time tell when it changed.
    A `tmp-open-N` being made is synced by the engine before it is renamed."""
    written = sorted(
        (name for name in names if name.startswith(_OPEN_SEGMENT)),
        key=lambda name: int(name[len(_OPEN_SEGMENT) :]),
    )[:1]
    written += [n for n in names if n.startswith(_CLOSED_SEGMENT) and n not in closed_synced]
    if _FIRST_INDEX in names:
        try:
            st = os.stat(wal / _FIRST_INDEX)
        except FileNotFoundError:
            return written
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if first_index.get(wal) != seen:
            first_index[wal] = seen
            written.append(_FIRST_INDEX)
    return written
