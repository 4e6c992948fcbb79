"""Where a qdrant-edge call runs (`EngineCalls`), and concurrent small calls joined (`CallBatcher`).

The engine holds the GIL through its calls, so in the engine worker a short call runs
on the worker's event loop (`here`), queued behind one in flight on a thread; what is
long or waits on the disk runs on a thread (`worker`: opening, SQLite commits, purges,
upkeep, bulk transfer), the group commit's syncs on a thread of their own (`syncing`),
where a stalled disk holds up the writes waiting for it, never the loop. `idle_for`
and `alone` tell the janitor when the engine is quiet. `CallBatcher`: calls arriving
while one runs join the next, one engine call and one log append for all of them; a
lone call waits for nothing. Failures translate alike (engine.translate).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any
from typing import Generic
from typing import NoReturn
from typing import TypeVar

from adapters.errors import BackendUnavailable
from adapters.qdrant.edge.engine import fatal
from adapters.qdrant.edge.engine import translate

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
