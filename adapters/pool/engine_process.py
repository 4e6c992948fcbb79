"""One engine worker process, seen from the server: built, started, called, watched, restarted.

A spare stands by to replace it (imported, its store not opened); calls made meanwhile wait
for the replacement a moment, and calls in flight that may be sent twice are sent again.

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
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters import frames
from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.errors import BackendUnavailable
from adapters.values import SearchMode
from adapters.values import StoreCondition

log = logging.getLogger(__name__)

# A heartbeat (the worker's condition) every HEARTBEAT_S; no answer within HANG_S is
# a hang. Generous: the janitor's longest engine calls (a vacuum of a big shard) hold
# the worker for seconds.
HEARTBEAT_S = 1.0
HANG_S = 30.0
MAX_BACKOFF_S = 30.0
# A call made while its worker is being replaced waits this long after the loss for the
# replacement (a spare opens the store in a fraction of it); past it, or while the worker
# keeps failing to start, it is refused at once.
RESTART_WAIT_S = 1.2
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
    # Directories searched first for `backend`'s module (a backend of one's own, a test's)
    path: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [
            "--backend",
            self.backend,
            "--options",
            json.dumps(dict(self.options)),
            "--data-dir",
            str(self.data_dir.absolute()),
            *(f"--path={directory}" for directory in self.path),
        ]


@dataclass(slots=True)
class InFlight:
    """A call sent and not answered: sent again to a replacement after a crash where
    `again` (the same call twice does the same), once; `about` names it in the log."""

    future: asyncio.Future[tuple[Any, float]]
    message: tuple[Any, ...]
    again: bool
    about: Callable[[], str]
    crashes: int = 0


@dataclass(frozen=True, slots=True)
class Launched:
    """A worker process started, with its end of the socket pair."""

    process: asyncio.subprocess.Process
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


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
        self._pending: dict[int, InFlight] = {}
        self._again: dict[int, InFlight] = {}  # in flight at the crash: for the replacement
        self._ids = itertools.count(1)
        self._up = asyncio.Event()
        self._lost_at: float | None = None  # when it was last lost (loop time)
        self._failing = False  # a replacement failed to start: refuse at once
        self._closing = False
        self._tasks: list[asyncio.Task[None]] = []
        self._spare: Launched | None = None  # the replacement standing by
        self._standing_by: asyncio.Task[None] | None = None
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

    @property
    def spare_pid(self) -> int | None:
        """The spare standing by to replace the worker, if one does."""
        return None if self._spare is None else self._spare.process.pid

    async def start(self) -> None:
        """Start the worker and wait until its store is open; raise what opening raised."""
        reader = await self._spawn()
        self._tasks = [
            asyncio.create_task(self._supervise(reader), name=f"{self.label} supervisor"),
            asyncio.create_task(self._heartbeat(), name=f"{self.label} heartbeat"),
        ]

    async def _launch(self, standby: bool) -> Launched:
        """A worker process; a spare (`standby`) opens nothing until it is sent `go`."""
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",  # isolated: the working directory (the data volume) is not on the path
                "-m",
                "adapters.engine.engine_worker",
                "--fd",
                str(theirs.fileno()),
                "--server-pid",
                str(os.getpid()),
                *self._argv,
                *(["--standby"] if standby else []),
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=ours)
        return Launched(process, reader, writer)

    async def _spawn(self) -> asyncio.StreamReader:
        """The store opened by the spare standing by, or else by a worker started now."""
        launched = self._take_spare()
        if launched is None:
            launched = await self._launch(standby=False)
        else:
            launched.writer.write(frames.encode(("go",)))
        self._process, self._writer = launched.process, launched.writer
        self._outbox = frames.Outbox(self._writer)
        first = await self._next(launched.reader)
        if first is None or first[0] != "ready":
            status = await self._reap()
            if first is not None and first[0] == "failed":
                raise first[1]
            raise BackendUnavailable(
                f"the {self.label} exited while opening the store (exit status {status})"
            )
        self.condition = StoreCondition()
        self._up.set()
        self._stand_by()
        return launched.reader

    def _take_spare(self) -> Launched | None:
        """The spare standing by, if it is alive; it stands by no more."""
        spare, self._spare = self._spare, None
        if spare is not None and spare.process.returncode is not None:
            spare.writer.close()
            return None
        return spare

    def _stand_by(self) -> None:
        """Start a spare in the background, unless one stands by or is starting."""
        if self._closing or self._spare is not None:
            return
        if self._standing_by is not None and not self._standing_by.done():
            return
        self._standing_by = asyncio.create_task(self._start_spare(), name=f"{self.label} spare")

    async def _start_spare(self) -> None:
        try:
            spare = await self._launch(standby=True)
        except OSError as error:  # no spare: a replacement is started when needed
            log.warning("the %s's spare did not start: %s", self.label, error)
            return
        if self._closing:
            await self._dismiss(spare)
        else:
            self._spare = spare

    async def _dismiss(self, spare: Launched) -> None:
        """Let a spare go: it exits when its socket closes."""
        spare.writer.close()
        try:
            await asyncio.wait_for(spare.process.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                spare.process.kill()
            await spare.process.wait()

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
                flight = self._pending.pop(message[1], None)
                if flight is None or flight.future.done():
                    continue
                if message[2]:
                    flight.future.set_result((message[3], message[4]))
                else:
                    flight.future.set_exception(message[3])
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
                    self._give_up()
            self._failing = False
            self._send_again()
            log.info("the %s is serving again", self.label)

    async def _lost(self) -> int | None:
        """Keep what was in flight for the replacement where that is safe, fail the rest,
        say so, and collect the dead process."""
        self._up.clear()
        self._lost_at = asyncio.get_running_loop().time()
        self.condition = StoreCondition(
            problems=(f"the embedded store's {self.label} stopped and is being restarted",)
        )
        pending, self._pending = self._pending, {}
        asyncio.get_running_loop().call_later(RESTART_WAIT_S, self._overdue, self._lost_at)
        for call_id, flight in pending.items():
            if flight.future.done():
                continue
            flight.crashes += 1
            if flight.again and flight.crashes == 1 and not self._closing:
                self._again[call_id] = flight
            elif flight.crashes > 1:
                log.error(
                    "a call was in flight at two crashes of the %s in a row; refused: %s",
                    self.label,
                    flight.about(),
                )
                flight.future.set_exception(
                    BackendUnavailable(
                        f"the embedded store's {self.label} stopped twice during this call"
                        f" ({flight.about()}); it was not tried again"
                    )
                )
            else:
                flight.future.set_exception(self._gone())
        return await self._reap()

    def _gone(self) -> BackendUnavailable:
        return BackendUnavailable(f"the embedded store's {self.label} stopped; it is restarting")

    def _give_up(self) -> None:
        """A replacement failed to start: what waits for one is refused, and what comes
        is refused at once until one starts."""
        self._failing = True
        self.queue.fail(self._gone())
        self._refuse_again()

    def _overdue(self, lost_at: float) -> None:
        """No replacement within the wait since the loss at `lost_at`: what waits to be
        sent again is refused."""
        if not self.up and lost_at == self._lost_at:
            self._refuse_again()

    def _refuse_again(self) -> None:
        """What waits to be sent again to a replacement is refused."""
        again, self._again = self._again, {}
        for flight in again.values():
            if not flight.future.done():
                flight.future.set_exception(self._gone())

    def _send_again(self) -> None:
        """What was in flight at the crash, sent to the replacement."""
        again, self._again = self._again, {}
        for call_id, flight in again.items():
            if not flight.future.done():
                self._pending[call_id] = flight
                self._send(flight.message)

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

    async def ready(self) -> None:
        """Once the worker is up: at once, or after waiting for its replacement while one
        is expected (within `RESTART_WAIT_S` of the loss, none having failed to start);
        else `BackendUnavailable` at once."""
        if self.up and self._outbox is not None:
            return
        if self._lost_at is not None and not (self._closing or self._failing):
            left = self._lost_at + RESTART_WAIT_S - asyncio.get_running_loop().time()
            if left > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._up.wait()
        self.require_up()

    def _send(self, message: tuple[Any, ...]) -> None:
        self.require_up()
        assert self._outbox is not None  # require_up checked it
        self._outbox.send(message)

    async def _ask(
        self,
        message: tuple[Any, ...],
        caller: Caller | None = None,
        again: bool = False,
        about: Callable[[], str] | None = None,
    ) -> Any:
        """The answer to `message`; a read made for `caller` waits its turn first. `again`:
        sent again to a replacement if the worker dies meanwhile (once)."""
        if caller is None:
            return (await self._exchange(message, again, about))[0]
        expected = await self.queue.turn(caller)
        took_s = None
        try:
            value, took_s = await self._exchange(message, again, about)
            return value
        finally:
            self.queue.done(caller.tenant, expected, took_s)

    async def _exchange(
        self, message: tuple[Any, ...], again: bool, about: Callable[[], str] | None
    ) -> tuple[Any, float]:
        """The answer to `message`, and the seconds the worker spent on it."""
        await self.ready()
        call_id = message[1]
        future: asyncio.Future[tuple[Any, float]] = asyncio.get_running_loop().create_future()
        self._send(message)
        named = about or (lambda: str(message[3] if message[0] == "call" else message[0]))
        self._pending[call_id] = InFlight(future, message, again, named)
        try:
            return await future
        except asyncio.CancelledError:
            self._again.pop(call_id, None)
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
        again: bool = False,
        about: Callable[[], str] | None = None,
    ) -> Any:
        """`method` of the backend (or of its `part`) in the worker. With a `caller`
        (adapters/callers.py), a read that waits its turn in the queue first (only the
        server's: the worker answers what it is sent, in order). `again`: the same call
        twice does the same, so a call in flight when the worker dies is sent once more to
        its replacement; `about` names the call in the log if that dies too."""
        message = ("call", next(self._ids), part, method, args, dict(kwargs or {}))
        return await self._ask(message, caller, again, about)

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
        if self._standing_by is not None:
            await asyncio.gather(self._standing_by, return_exceptions=True)
        spare, self._spare = self._spare, None
        if spare is not None:
            await self._dismiss(spare)
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
