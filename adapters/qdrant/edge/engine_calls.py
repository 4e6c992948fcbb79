"""Engine calls: where a qdrant-edge call runs (`EngineCalls`), and concurrent small
calls joined into one (`CallBatcher`).

`EngineCalls`: on a thread, or on the engine worker's event loop. The store runs
in the engine worker process (adapters/worker/), whose event loop does nothing but
read calls and send answers, and the server decides what reaches
it and when (adapters/worker/engine_queue.py). qdrant-edge holds the GIL through its calls
(update, query, retrieve, optimize and flush; tests/qdrant/test_edge_quirks.py
pins it for update), so a thread frees nothing for a short call and costs two
thread hops. `here()` runs a call on the loop, unless another call is in flight
on a thread: then it queues behind it there, so the loop never waits on a
shard's lock for another thread (qdrant-edge has no threads of its own that take
it). `worker()` is for what is long or does I/O that releases the GIL: opening,
SQLite commits, purges, maintenance, the disk check, bulk transfer. Both
translate failures alike (engine.translate).

`syncing()` runs the group commit's syncs (log_sync.py) on a thread of their
own: an `fsync` releases the GIL and takes no shard's lock, so the engine goes on
while the disk works, and a disk that stalls holds up the writes waiting for it,
never the loop.

`idle_for` tells the janitor how long no call but its own has been in flight: a
flush, a vacuum or a reopen holds the engine, so it waits for a quiet moment
(upkeep.py). `alone` says whether no call at all is in flight: a reopen closes a
shard that a call in flight may hold.

`CallBatcher`: concurrent small engine calls share one: one engine call, one WAL append.

Why: under concurrent commits each upsert (and each existence check of an
explicit id) cost an engine call of its own, then a hop to a worker thread and a
wake-up of the event loop on the way back, on the same two cores the model
needs: a large share of the event loop went to those wake-ups. The calls now
mostly run on the event loop, and one engine call for eight
upserts still beats several: splitting it into smaller chunks lowered the
8-caller throughput every time (benchmarks/README.md). As the embedder does for
texts, the first call starts a flush at once (a lone call waits for nothing) and
every call that arrives while it runs joins the next one. Each caller's await returns only when
the engine call holding its item has returned; the group commit then makes it
durable before it is acknowledged (log_sync.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Generic, NoReturn, TypeVar

from adapters.errors import BackendUnavailable
from adapters.qdrant.edge.engine import fatal, translate

T = TypeVar("T")


class EngineCalls:
    """A small thread pool, and the rule for when to skip it."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._syncer: ThreadPoolExecutor | None = None
        self._in_workers = 0  # calls submitted to the pool and not yet returned
        self._in_flight = 0  # calls not marked background, running or queued
        self.clock: Callable[[], float] = time.monotonic
        self._last_active = self.clock()

    @property
    def started(self) -> bool:
        return self._executor is not None

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="qdrant-edge")
        self._syncer = ThreadPoolExecutor(1, thread_name_prefix="qdrant-edge-sync")

    def stop(self) -> None:
        for executor in (self._executor, self._syncer):
            if executor is not None:
                executor.shutdown(wait=True)
        self._executor = self._syncer = None

    def idle_for(self) -> float:
        """Seconds since the last call not marked background ended (0 while one runs)."""
        return 0.0 if self._in_flight else max(0.0, self.clock() - self._last_active)

    def alone(self) -> bool:
        """No call in flight, on a thread or on the loop."""
        return not self._in_workers and not self._in_flight

    async def worker(self, func: Callable[..., T], *args: Any, background: bool = False) -> T:
        """`func(*args)` on a worker thread; `background`: the janitor's, not a request's."""
        if self._executor is None:
            raise BackendUnavailable("embedded store is not open")
        loop = asyncio.get_running_loop()
        self._in_workers += 1
        self._in_flight += not background
        try:
            return await loop.run_in_executor(self._executor, partial(func, *args))
        except BaseException as error:  # a Rust panic is a BaseException
            _raise_translated(error)
        finally:
            self._in_workers -= 1
            if not background:
                self._in_flight -= 1
                self._last_active = self.clock()

    async def syncing(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the sync thread; a request's work (it counts as in flight)."""
        if self._syncer is None:
            raise BackendUnavailable("embedded store is not open")
        self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._syncer, partial(func, *args)
            )
        except BaseException as error:
            _raise_translated(error)
        finally:
            self._in_flight -= 1
            self._last_active = self.clock()

    async def here(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the event loop when no thread's call is in flight, else `worker`."""
        if self._executor is None:
            raise BackendUnavailable("embedded store is not open")
        if self._in_workers:
            return await self.worker(func, *args)
        self._in_flight += 1
        try:
            return func(*args)
        except BaseException as error:
            _raise_translated(error)
        finally:
            self._in_flight -= 1
            self._last_active = self.clock()


def _raise_translated(error: BaseException) -> NoReturn:
    """Raise what callers expect for a failed call; a fatal error (cancellation) as is."""
    translated = error if fatal(error) else translate(error)
    if translated is error:
        raise error
    raise translated from error


Item = TypeVar("Item")
Result = TypeVar("Result")
MAX_BATCH = 256


class CallBatcher(Generic[Item, Result]):
    """`call` takes a list of items and returns one result per item, in order."""

    def __init__(
        self, call: Callable[[list[Item]], Awaitable[list[Result]]], max_batch: int = MAX_BATCH
    ) -> None:
        self._call = call
        self._max_batch = max_batch
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        """The result for `item`, once its batch is done; raise what its batch raised."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush(), name="edge calls")
        return await future

    async def drain(self) -> None:
        """Wait until every submitted call is done (at close)."""
        while self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    results = await self._call([item for item, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._flushing = None
