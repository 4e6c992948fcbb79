"""The engine worker: a child process that builds a backend, owns it, and answers its calls.

A spare (`--standby`) imports what it will run and waits for the server's `go` before it
takes the store's lock and opens it: a worker's replacement, ready ahead of need.

It serves each message (frames.py) as a task of its own loop, so the backend's batching sees
the calls that arrive together. See docs/backends.md, "The engine worker process".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import faulthandler
import fcntl
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any
from typing import TextIO

from adapters import frames
from adapters.base import VectorBackend
from adapters.errors import BackendUnavailable
from adapters.registry import build
from adapters.registry import load
from adapters.store_files import lock_file

log = logging.getLogger(__name__)

LOCK_WAIT_S = 10.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Once the store is open, the engine yields a core to the server's event loop, as the
# model's threads do (plugin/scheduling/thread_priority.py): work waits, the loop
# answers and refuses. Not before: opening the store is all there is to do then, and
# on busy cores a lowered priority made it take ten times as long.
NICE_INCREMENT = 10


class ForwardedLogs(logging.Handler):
    """Sends each log record to the server, whose logging formats and writes it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._loop = loop
        self._writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.exc_info:  # the traceback as text: a traceback does not pickle
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.msg, record.args, record.exc_info = record.getMessage(), None, None
            frame = frames.encode(("log", record))
            self._loop.call_soon_threadsafe(self._writer.write, frame)
        except Exception:
            self.handleError(record)


class Worker:
    """Serves one store's calls until `stop` or the end of the socket."""

    def __init__(
        self, store: VectorBackend, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._store = store
        self._reader = reader
        self._outbox = frames.Outbox(writer)
        self._calls: dict[int, asyncio.Task[None]] = {}
        self._generators: dict[int, AsyncIterator[Any]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def _forget(self, call_id: int, _: asyncio.Task[None]) -> None:
        self._calls.pop(call_id, None)

    def _send(self, message: tuple[Any, ...]) -> None:
        self._outbox.send(message)

    async def serve(self) -> None:
        while (message := await frames.read(self._reader)) is not None:
            kind = message[0]
            if kind == "stop":
                break
            if kind == "cancel":
                if (task := self._calls.get(message[1])) is not None:
                    task.cancel()
                continue
            if kind == "discard":  # a generator its caller left unfinished
                if (generator := self._generators.pop(message[1], None)) is not None:
                    closing = asyncio.create_task(generator.aclose())  # type: ignore[attr-defined]
                    self._closing.add(closing)
                    closing.add_done_callback(self._closing.discard)
                continue
            call_id = message[1]
            task = asyncio.create_task(self._answer(message))
            self._calls[call_id] = task
            task.add_done_callback(partial(self._forget, call_id))
        for task in list(self._calls.values()):
            task.cancel()
        await asyncio.gather(*self._calls.values(), return_exceptions=True)

    async def _answer(self, message: tuple[Any, ...]) -> None:
        kind, call_id = message[:2]
        started = time.perf_counter()
        try:
            value = await self._run(kind, message)
        except asyncio.CancelledError:
            return  # the caller gave up, and expects no answer
        except Exception as error:
            self._send(("reply", call_id, False, frames.portable(error)))
            return
        try:
            self._send(("reply", call_id, True, value, time.perf_counter() - started))
        except Exception as error:  # an answer that does not pickle: its caller still hears
            self._send(("reply", call_id, False, frames.portable(error)))

    async def _run(self, kind: str, message: tuple[Any, ...]) -> Any:
        if kind == "next":
            generator = self._generators[message[2]]
            try:
                return await generator.__anext__()
            except StopAsyncIteration:
                del self._generators[message[2]]
                return frames.END
        _, call_id, part, method, args, kwargs = message
        if method not in frames.CALLS or (part is not None and part not in frames.PARTS):
            raise ValueError(f"the engine worker has no call {part}.{method}")
        target = self._store if part is None else getattr(self._store, part)
        if kind == "open":
            self._generators[call_id] = getattr(target, method)(*args, **kwargs)
            return None
        result = getattr(target, method)(*args, **kwargs)
        if asyncio.iscoroutine(result):
            result = await result
        return result


def die_with_the_server(server_pid: int) -> None:
    """SIGKILL this process when the server's process ends, however it ends: a worker
    left behind would still hold the store when the next server's worker opens it.

    The server's pid is told, not assumed: in a container the server is pid 1."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != server_pid:  # the server was gone before the line above
        os._exit(1)


async def hold_the_store(data_dir: Path) -> TextIO:
    """An exclusive lock on the data directory: one process opens a store at a time.

    A worker killed a moment ago may still be on its way out: wait for it a while."""
    lock = lock_file(data_dir)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                raise BackendUnavailable(
                    "another process holds the embedded store (one plugin per data directory)"
                ) from None
            await asyncio.sleep(0.05)


async def called_on(reader: asyncio.StreamReader, backend: str) -> bool:
    """A spare's wait: its backend's modules imported, nothing opened, until the server
    sends `go` (True: the worker it stands by for is gone) or lets it go (False)."""
    load(backend)
    message = await frames.read(reader)
    return message is not None and message[0] == "go"


async def run(
    fd: int,
    server_pid: int,
    backend: str,
    options: dict[str, Any],
    data_dir: Path,
    standby: bool = False,
) -> int:
    die_with_the_server(server_pid)
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    root = logging.getLogger()
    root.handlers[:] = [ForwardedLogs(asyncio.get_running_loop(), writer)]
    root.setLevel(logging.INFO)
    if standby and not await called_on(reader, backend):
        return 0
    try:
        lock = await hold_the_store(data_dir)
    except BackendUnavailable as error:
        writer.write(frames.encode(("failed", error)))
        await writer.drain()
        return 1
    try:
        store = build(backend, options)
        await store.start()
    except Exception as error:
        writer.write(frames.encode(("failed", frames.portable(error))))
        await writer.drain()
        lock.close()
        return 1
    os.nice(NICE_INCREMENT)
    writer.write(frames.encode(("ready",)))
    try:
        await Worker(store, reader, writer).serve()
    finally:
        await store.close()  # synced: the exit status says so
        lock.close()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engine_worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--options", type=json.loads, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--standby", action="store_true", help="a spare: open on `go`")
    parser.add_argument("--path", action="append", default=[], help="searched first")
    args = parser.parse_args(argv)
    sys.path[:0] = args.path
    # A fatal signal in the engine (a SIGBUS from a mapped file, a segfault) leaves every
    # thread's Python stack on stderr, which is the server's log, before the worker dies.
    faulthandler.enable(all_threads=True)
    return asyncio.run(
        run(args.fd, args.server_pid, args.backend, args.options, args.data_dir, args.standby)
    )


if __name__ == "__main__":
    sys.exit(main())
