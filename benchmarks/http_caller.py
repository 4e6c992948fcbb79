"""One caller's keep-alive HTTP/1.1 connection, for the load generators of the
fairness benchmarks.

Why not aiohttp's client: on this 2-core machine the load generator shares the
cores with the server it measures, and every microsecond it spends per request is
taken from the server and, worse, delays the reading of answers that have already
come back, which the benchmark then counts as the server's time. This one is an
asyncio protocol that parses only what the plugin answers (`Content-Length`
bodies on a connection kept alive, as the platform's client keeps it), and spent
a fraction of aiohttp's client CPU per request (`python -m benchmarks.caller_cost`:
90 against 203 to 220 microseconds of user CPU a request).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar
from urllib.parse import urlsplit

Request = tuple[str, str, Any]  # method, path, JSON body
TIMEOUT_S = 2.0  # the platform's client: 2 s per call, a slower answer is a failure
T = TypeVar("T")


class _Answers(asyncio.Protocol):
    """Completes `waiter` with (status, Retry-After) once a whole answer has come."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, float]] | None = None
        self._buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        lines = self._buffer[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        size = end + 4 + int(headers.get("content-length", 0))
        if len(self._buffer) < size:
            return
        del self._buffer[:size]
        waiter, self.waiter = self.waiter, None
        if not waiter.done():
            status = int(lines[0].split(" ", 2)[1])
            waiter.set_result((status, float(headers.get("retry-after", 0) or 0)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))


def _expire(waiter: asyncio.Future[tuple[int, float]]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer within the client's timeout"))


class Connection:
    """Sends one request at a time; reconnects after a failure, as a pooled client does."""

    def __init__(self, base: str, timeout_s: float = TIMEOUT_S) -> None:
        url = urlsplit(base)
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port or 80
        self._timeout_s = timeout_s
        self._answers: _Answers | None = None

    async def open(self) -> _Answers:
        if self._answers is None or self._answers.transport is None:
            loop = asyncio.get_running_loop()
            _, self._answers = await loop.create_connection(_Answers, self._host, self._port)
        return self._answers

    def close(self) -> None:
        if self._answers is not None and self._answers.transport is not None:
            self._answers.transport.close()
        self._answers = None

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def send(self, request: Request) -> tuple[int, float, float]:
        """(status, seconds, the Retry-After it asked for or 0); status 0 is no answer
        within the timeout, or a transport error."""
        started = time.perf_counter()
        method, path, body = request
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[tuple[int, float]] = loop.create_future()
        # One timer for the whole call: asyncio.wait_for's own coroutine cost about as
        # much CPU as the rest of the request.
        deadline = loop.call_later(self._timeout_s, _expire, waiter)
        try:
            answers = self._answers
            if answers is None or answers.transport is None:
                answers = await asyncio.wait_for(self.open(), self._timeout_s)
            assert answers.transport is not None
            answers.waiter = waiter
            answers.transport.write(head + payload)
            status, retry_after = await waiter
        except (OSError, TimeoutError, ValueError):
            self.close()  # an answer may still be on its way: never read it as the next one's
            status, retry_after = 0, 0.0
        finally:
            deadline.cancel()
        return status, time.perf_counter() - started, retry_after


async def gather_then_close(connections: Sequence[Connection], *work: Awaitable[T]) -> list[T]:
    """Await all of `work` together, then close `connections`, however the work ended."""
    try:
        return await asyncio.gather(*work)
    finally:
        for connection in connections:
            connection.close()
