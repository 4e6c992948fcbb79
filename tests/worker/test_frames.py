"""The messages to and from an engine worker (adapters/frames.py): the frames sent in
one turn of the event loop reach the socket in one write, in order, and a stream being
closed takes none."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from adapters import frames

Pair = tuple[asyncio.StreamWriter, asyncio.StreamReader, list[int]]


@pytest.fixture
async def pair(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Pair]:
    """A writer on one end of a socket pair (its writes' sizes counted), a reader on the other."""
    ours, theirs = socket.socketpair()
    _, writer = await asyncio.open_connection(sock=ours)
    reader, their_writer = await asyncio.open_connection(sock=theirs)
    writes: list[int] = []
    write = writer.transport.write

    def counted(data: bytes | bytearray | memoryview) -> None:
        writes.append(len(data))
        write(data)

    monkeypatch.setattr(writer.transport, "write", counted)
    yield writer, reader, writes
    for end in (writer, their_writer):
        end.close()


async def test_frames_sent_in_one_turn_are_one_write_in_order(pair: Pair) -> None:
    writer, reader, writes = pair
    outbox = frames.Outbox(writer)
    sent = [("reply", call_id, True, f"value {call_id}", 0.001) for call_id in range(3)]
    for message in sent:
        outbox.send(message)
    assert writes == []  # not before the turn is over
    received = [await frames.read(reader) for _ in sent]
    assert received == sent
    assert writes == [sum(len(frames.encode(message)) for message in sent)]
    outbox.send(("reply", 3, True, None, 0.0))  # a later turn: a write of its own
    assert await frames.read(reader) == ("reply", 3, True, None, 0.0)
    assert len(writes) == 2


async def test_a_stream_being_closed_takes_no_frame(pair: Pair) -> None:
    writer, reader, writes = pair
    outbox = frames.Outbox(writer)
    outbox.send(("stop",))
    writer.close()  # before the turn is over
    await asyncio.sleep(0.01)
    assert writes == []
    assert await frames.read(reader) is None  # the end of the stream, nothing before it
