"""`EngineCalls`: where a qdrant-edge call runs, in the engine worker.

The engine holds the GIL through its calls: a short one runs on the worker's event loop, a long
one or one that waits on the disk on a thread, the group commit's syncs on a thread of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any
from typing import TypeVar

from adapters.engine.engine import fatal
from adapters.engine.engine import translate
from adapters.errors import BackendUnavailable

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
        executor = _open(self._executor)
        self._in_workers += 1
        try:
            with self._running(counted=not background):
                return await asyncio.get_running_loop().run_in_executor(
                    executor, partial(func, *args)
                )
        finally:
            self._in_workers -= 1

    async def syncing(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the sync thread; a request's work (it counts as in flight)."""
        syncer = _open(self._syncer)
        with self._running():
            return await asyncio.get_running_loop().run_in_executor(syncer, partial(func, *args))

    def behind_sync(self, func: Callable[..., object], *args: Any) -> None:
        """`func(*args)` on the sync thread after what it holds, unawaited (it handles its
        own failures); the next sync, and `synced_behind`, run after it."""
        _open(self._syncer).submit(func, *args)

    async def synced_behind(self) -> None:
        """Once what `behind_sync` handed the sync thread has run."""
        await self.syncing(lambda: None)

    async def here(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the event loop when no thread's call is in flight, else `worker`."""
        _open(self._executor)
        if self._in_workers:
            return await self.worker(func, *args)
        with self._running():
            return func(*args)

    @contextmanager
    def _running(self, *, counted: bool = True) -> Iterator[None]:
        """A call in flight (`counted`: a request's); a failure raised as callers expect it,
        a fatal one (cancellation) as is. A Rust panic is a BaseException."""
        self._in_flight += counted
        try:
            yield
        except BaseException as error:
            if fatal(error) or (translated := translate(error)) is error:
                raise
            raise translated from error
        finally:
            if counted:
                self._in_flight -= 1
                self._last_active = self.clock()


def _open(executor: ThreadPoolExecutor | None) -> ThreadPoolExecutor:
    if executor is None:
        raise BackendUnavailable("embedded store is not open")
    return executor
