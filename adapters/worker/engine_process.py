"""One engine worker process, seen from the server: built, started, called, watched, restarted.

`EngineQueue` sends it the queued reads tenant by tenant, a little engine time at once.
See docs/backends.md, "The engine worker process".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.errors import BackendUnavailable
from adapters.values import SearchMode
from adapters.values import StoreCondition
from adapters.worker import frames

log = logging.getLogger(__name__)

# A heartbeat (the worker's condition) every HEARTBEAT_S; no answer within HANG_S is
# a hang. Generous: the janitor's longest engine calls (a vacuum of a big shard) hold
# the worker for seconds.
HEARTBEAT_S = 1.0
HANG_S = 30.0
MAX_BACKOFF_S = 30.0
# Engine time sent to the worker at once (`EngineQueue`): a few small reads keep it
# busy while an answer travels back; a read over a big namespace goes alone.
READ_BUDGET_S = 0.004
MOST_READS = 8
STOP_TIMEOUT_S = 120.0  # closing flushes every shard
# The weight of the latest read in a caller's moving average of its reads' cost.
SMOOTHING = 0.2
FIRST_GUESS_S = 0.001  # a caller not seen yet: a small read
FORGET_AFTER = 1024  # callers remembered before those with nothing pending are dropped


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Which backend a worker builds, and how: all of it plain values, for its command line."""

    backend: str  # its name in adapters/registry.py, built in the worker with `options`
    options: Mapping[str, Any]  # its keyword arguments, as JSON
    data_dir: Path  # what the backend owns: one process holds it at a time (a lock file)
    search_modes: frozenset[SearchMode]
    name: str  # the backend's, as the server names it

    def argv(self) -> list[str]:
        return [
            "--backend",
            self.backend,
            "--options",
            json.dumps(dict(self.options)),
            "--data-dir",
            str(self.data_dir.absolute()),
        ]


class EngineQueue:
    """Reads in flight up to `budget_s` of expected engine time (and at most `most`)."""

    def __init__(self, budget_s: float, most: int) -> None:
        self.budget_s = budget_s
        self.most = most
        self.in_flight = 0
        self.served = 0  # reads answered (adapters/callers.py, `Waiting`)
        self.load_s = 0.0  # the expected engine time of the reads in flight
        self._cost: dict[str | None, float] = {}
        self._waiting: dict[str | None, deque[asyncio.Future[float]]] = {}
        self._now = 0.0  # virtual time: the start of the read sent last
        self._finish: dict[str | None, float] = {}  # each caller's last read's finish

    def expected(self, caller: str | None) -> float:
        return self._cost.get(caller, FIRST_GUESS_S)

    def _fits(self, caller: str | None) -> bool:
        if self.in_flight == 0:
            return True
        fits = self.load_s + self.expected(caller) <= self.budget_s
        return fits and self.in_flight < self.most

    def _start(self, caller: str | None) -> float:
        return max(self._finish.get(caller, 0.0), self._now)

    def _take(self, caller: str | None) -> float:
        expected = self.expected(caller)
        self._now = self._start(caller)
        self._finish[caller] = self._now + expected
        self.in_flight += 1
        self.load_s += expected
        return expected

    async def turn(self, for_whom: Caller) -> float:
        """Wait until a read for `for_whom` may be sent; the cost it is expected to have,
        to be handed to `done()` with the cost it had once its answer came."""
        caller = for_whom.tenant
        if not self._waiting and self._fits(caller):
            return self._take(caller)
        ready: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(caller, deque()).append(ready)
        waiting = for_whom.waiting
        if waiting is not None:
            waiting.joined(self)
        try:
            expected = await ready
        except asyncio.CancelledError:  # its request ran out of time: it is left waiting
            if ready.done() and not ready.cancelled():  # its turn came as it was cancelled
                self.done(caller, ready.result(), None)
            raise
        except BaseException:
            if waiting is not None:
                waiting.left()
            raise
        if waiting is not None:
            waiting.left()
        return expected

    def done(self, caller: str | None, expected: float, took_s: float | None) -> None:
        """A read's answer came (`took_s` in the worker; None: it failed): the next go."""
        self.in_flight -= 1
        self.load_s = max(0.0, self.load_s - expected)
        if took_s is not None:
            self.served += 1
            self._cost[caller] = expected + SMOOTHING * (took_s - expected)
        while self._waiting:
            caller = min(self._waiting, key=self._start)
            if not self._fits(caller):
                return
            queue = self._waiting[caller]
            ready = queue.popleft()
            if not queue:
                del self._waiting[caller]
            if not ready.done():  # a read given up while it waited is skipped
                ready.set_result(self._take(caller))
        if not self.in_flight:  # idle: nobody's past reads count against them
            self._finish.clear()
        elif len(self._finish) > FORGET_AFTER:  # callers whose reads are all in the past
            self._finish = {c: f for c, f in self._finish.items() if f > self._now}

    def fail(self, error: BaseException) -> None:
        """The worker is gone: every read waiting fails with `error`."""
        for queue in self._waiting.values():
            for ready in queue:
                if not ready.done():
                    ready.set_exception(error)
        self._waiting.clear()

    def waiting(self) -> int:
        return sum(map(len, self._waiting.values()))


class EngineProcess:
    """The worker that builds `spec`'s backend (`python -m ...engine_worker`)."""

    def __init__(self, spec: WorkerSpec, label: str = "engine worker") -> None:
        self.spec = spec
        self._argv = spec.argv()
        self.label = label
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._outbox: frames.Outbox | None = None  # the frames for `_writer`
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._up = asyncio.Event()
        self._closing = False
        self._tasks: list[asyncio.Task[None]] = []
        self.restarts = 0
        self.queue = EngineQueue(READ_BUDGET_S, MOST_READS)
        self.hang_s = HANG_S
        self.condition = StoreCondition()

    @property
    def up(self) -> bool:
        return self._up.is_set()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def start(self) -> None:
        """Start the worker and wait until its store is open; raise what opening raised."""
        reader = await self._spawn()
        self._tasks = [
            asyncio.create_task(self._supervise(reader), name=f"{self.label} supervisor"),
            asyncio.create_task(self._heartbeat(), name=f"{self.label} heartbeat"),
        ]

    async def _spawn(self) -> asyncio.StreamReader:
        ours, theirs = socket.socketpair()
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",  # isolated: the working directory (the data volume) is not on the path
                "-m",
                "adapters.worker.engine_worker",
                "--fd",
                str(theirs.fileno()),
                "--server-pid",
                str(os.getpid()),
                *self._argv,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        reader, self._writer = await asyncio.open_connection(sock=ours)
        self._outbox = frames.Outbox(self._writer)
        first = await self._next(reader)
        if first is None or first[0] != "ready":
            status = await self._reap()
            if first is not None and first[0] == "failed":
                raise first[1]
            raise BackendUnavailable(
                f"the {self.label} exited while opening the store (exit status {status})"
            )
        self.condition = StoreCondition()
        self._up.set()
        return reader

    async def _next(self, reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
        """The next message that is not a log record (those are logged here)."""
        while (message := await frames.read(reader)) is not None:
            if message[0] != "log":
                return message
            record: logging.LogRecord = message[1]
            logging.getLogger(record.name).handle(record)
        return None

    async def _supervise(self, reader: asyncio.StreamReader) -> None:
        backoff = 0.0
        while True:
            while (message := await self._next(reader)) is not None:
                backoff = 0.0
                future = self._pending.pop(message[1], None)
                if future is None or future.done():
                    continue
                if message[2]:
                    future.set_result((message[3], message[4]))
                else:
                    future.set_exception(message[3])
            status = await self._lost()
            if self._closing:
                return
            log.error("the %s stopped (exit status %s); restarting it", self.label, status)
            while True:
                self.restarts += 1
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, max(0.5, backoff * 2))
                try:
                    reader = await self._spawn()
                    break
                except Exception as error:
                    log.error("the %s did not start again: %s", self.label, error)
            log.info("the %s is serving again", self.label)

    async def _lost(self) -> int | None:
        """Fail what was in flight, say so, and collect the dead process."""
        self._up.clear()
        self.condition = StoreCondition(
            problems=(f"the embedded store's {self.label} stopped and is being restarted",)
        )
        gone = BackendUnavailable(f"the embedded store's {self.label} stopped; it is restarting")
        self.queue.fail(gone)
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(gone)
        return await self._reap()

    async def _reap(self) -> int | None:
        if self._writer is not None:
            self._writer.close()
            self._writer = self._outbox = None
        if self._process is None:
            return None
        if self._closing:  # it is closing its store: give it the time
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), STOP_TIMEOUT_S)
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        return await self._process.wait()

    async def _heartbeat(self) -> None:
        # Ends on closing, not only on cancellation: Python 3.11's wait_for drops a
        # cancellation that arrives as the call it waits for completes.
        while not self._closing:
            await asyncio.sleep(HEARTBEAT_S)
            if not self.up:
                continue
            try:
                self.condition = await asyncio.wait_for(self.call(None, "condition"), self.hang_s)
            except TimeoutError:
                log.error("the %s did not answer for %.1f s; killing it", self.label, self.hang_s)
                if self._process is not None and self._process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        self._process.kill()  # the supervisor restarts it
            except BackendUnavailable:
                continue

    async def ping(self) -> None:
        """Raise unless the worker's backend answers its ping; its condition read afresh."""
        await self.call(None, "ping")
        self.condition = await self.call(None, "condition")

    def require_up(self) -> None:
        """`BackendUnavailable` unless the worker is up (it is restarting)."""
        if not self.up or self._outbox is None:
            raise BackendUnavailable(
                f"the embedded store's {self.label} is restarting; try again shortly"
            )

    def _send(self, message: tuple[Any, ...]) -> None:
        self.require_up()
        assert self._outbox is not None  # require_up checked it
        self._outbox.send(message)

    async def _ask(self, message: tuple[Any, ...], caller: Caller | None = None) -> Any:
        """The answer to `message`; a read made for `caller` waits its turn first."""
        if caller is None:
            return (await self._exchange(message))[0]
        expected = await self.queue.turn(caller)
        took_s = None
        try:
            value, took_s = await self._exchange(message)
            return value
        finally:
            self.queue.done(caller.tenant, expected, took_s)

    async def _exchange(self, message: tuple[Any, ...]) -> tuple[Any, float]:
        """The answer to `message`, and the seconds the worker spent on it."""
        call_id = message[1]
        future: asyncio.Future[tuple[Any, float]] = asyncio.get_running_loop().create_future()
        self._send(message)
        self._pending[call_id] = future
        try:
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(call_id, None) is not None and self.up:
                self._send(("cancel", call_id))
            raise

    async def call(
        self,
        part: str | None,
        method: str,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
    ) -> Any:
        """`method` of the backend (or of its `part`) in the worker. With a `caller`
        (adapters/callers.py), a read that waits its turn in the queue first (only the
        server's: the worker answers what it is sent, in order)."""
        message = ("call", next(self._ids), part, method, args, dict(kwargs or {}))
        return await self._ask(message, caller)

    async def open(
        self, part: str | None, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> int:
        """Start an async generator in the worker; its pages come from `next`."""
        call_id = next(self._ids)
        await self._ask(("open", call_id, part, method, args, dict(kwargs)))
        return call_id

    async def next(self, generator_id: int, caller: Caller = NOBODY) -> Any:
        """The generator's next page, or `frames.END`: a read, which waits its turn."""
        return await self._ask(("next", next(self._ids), generator_id), caller)

    def discard(self, generator_id: int) -> None:
        with contextlib.suppress(BackendUnavailable):
            self._send(("discard", generator_id))

    async def close(self) -> None:
        """Ask the worker to close its store (every shard synced), wait for it to exit."""
        self._closing = True
        serving = self.up  # a worker that never opened its store was reported by `start`
        supervisor, heartbeat = self._tasks or (None, None)
        if heartbeat is not None:
            heartbeat.cancel()
        if self.up and self._outbox is not None:
            self._outbox.send(("stop",))
        self._up.clear()
        if supervisor is not None:
            try:  # it logs what the worker logs while closing, then collects it
                await asyncio.wait_for(asyncio.shield(supervisor), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("the %s did not close its store in time; killing it", self.label)
            supervisor.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        status = await self._reap()
        if status and serving:
            log.error("the %s exited with status %s on closing", self.label, status)
