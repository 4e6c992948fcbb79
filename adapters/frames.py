"""The messages between the server process and its engine worker, over a socket pair: a
frame is a length and a pickle of plain values, a private format of the two ends."""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

from adapters import parts
from adapters.crossings import WORKER_CALLS
from adapters.crossings import split
from adapters.errors import BackendError

_LENGTH = struct.Struct(">I")
# What `next` answers when the generator is done.
END = "end"
# The calls a worker serves: those declared (adapters/crossings.py), and its condition
# (the server's heartbeat).
CALLS = frozenset(split(key)[1] for key in WORKER_CALLS) | {"condition"}
PARTS = frozenset(parts.PARTS)


class Outbox:
    """The frames for one stream, written together once the event loop's turn is over: the
    answers one group commit releases reach the socket in one write, waking the other side
    once instead of once each."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._frames: list[bytes] = []

    def send(self, message: tuple[Any, ...]) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self.flush)
        self._frames.append(encode(message))

    def flush(self) -> None:
        """Write what is waiting now (a stream being closed takes nothing more)."""
        waiting, self._frames = self._frames, []
        if waiting and not self._writer.is_closing():
            self._writer.write(b"".join(waiting))


def encode(message: tuple[Any, ...]) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message; None at the end of the stream (the other side is gone)."""
    try:
        head = await reader.readexactly(_LENGTH.size)
        (length,) = _LENGTH.unpack(head)
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message: tuple[Any, ...] = pickle.loads(body)
    return message


def portable(error: BaseException) -> BaseException:
    """`error` itself when it survives a pickle round trip, else a `BackendError` naming it:
    a reply that fails to encode would leave its caller waiting."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return BackendError(f"{type(error).__name__}: {error}")
    return error
