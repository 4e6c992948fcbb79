"""The connection cases of `scenarios/__main__.py`.

What happens before a request reaches the app: a request line over aiohttp's limit,
clients that send half a request or nothing, idle kept-alive connections, more
connections than the cap, file descriptors running out. Raw sockets throughout;
every wait is bounded, so the figures of a checkout without these limits read
"still open after N s" instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from pathlib import Path
from typing import Any

import aiohttp

from harness.raw_http import half_open
from harness.raw_http import log_lines

Outcome = tuple[str, bool]
HOST = "127.0.0.1"
MARKER = "zq-echo-marker"  # sent in each bad request; must never come back
WAIT_S = 30.0  # how long a case waits for the server to close a connection
HEALTH = f"GET /v1/health HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
CLOSING_HEALTH = HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
CAP = 50
FLOOD = 1000
FLOOD_FDS = 256


async def _until_closed(
    reader: asyncio.StreamReader, limit_s: float = WAIT_S
) -> tuple[bytes | None, float]:
    """What the server sent before closing, and when; None when still open at `limit_s`."""
    started = time.monotonic()
    received = b""
    try:
        async with asyncio.timeout(limit_s):
            while chunk := await reader.read(65536):
                received += chunk
    except TimeoutError:
        return None, limit_s
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started


async def _send_alone(port: int, raw: bytes) -> tuple[bytes | None, float]:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(raw)
    await writer.drain()
    try:
        return await _until_closed(reader)
    finally:
        writer.close()


def _answer(raw: bytes | None) -> tuple[int, str, Any]:
    """Status, content type and JSON body (None when the body is not JSON)."""
    if not raw:
        return 0, "", None
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    types = [
        line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("content-type")
    ]
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    return int(lines[0].split()[1]), types[0] if types else "", parsed


def _is_envelope(body: Any) -> bool:
    return isinstance(body, dict) and set(body) == {"code", "message"}


async def _one_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length")
    )
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def long_request_line(server: Any, _: aiohttp.ClientSession, __: Path) -> Outcome:
    line = f"GET /v1/health?{MARKER}={'a' * 9000} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    header = f"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: {MARKER}{'b' * 9000}\r\n\r\n".encode()
    parts, ok = [], True
    for what, raw in (("request line", line), ("header", header)):
        received, _ = await _send_alone(server.port, raw)
        status, content_type, body = _answer(received)
        echoed = received is not None and MARKER.encode() in received
        parts.append(f"{what} of 9 KB: {status} {content_type or '-'}, echoes the request {echoed}")
        ok = ok and status == 400 and _is_envelope(body) and not echoed
    return "; ".join(parts), ok


async def slow_clients(server: Any, _: aiohttp.ClientSession, __: Path) -> Outcome:
    half_body = (
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"namespaces": '
    )
    clients = {
        "half a head": b"GET /v1/health HTTP/1.1\r\nHost: x\r\n",
        "half a body": half_body,
        "nothing": b"",
    }
    results = await asyncio.gather(*[_send_alone(server.port, raw) for raw in clients.values()])
    parts = []
    for what, (received, seconds) in zip(clients, results, strict=True):
        if received is None:
            parts.append(f"{what}: still open after {seconds:.0f} s")
            continue
        status = _answer(received)[0]
        parts.append(f"{what}: closed after {seconds:.1f} s" + (f" ({status})" if status else ""))
    # The defaults: 5 s for a head, 10 s for a body; 5 s of slack.
    ok = all(received is not None and seconds < 15 for received, seconds in results)
    return "; ".join(parts), ok


async def idle_keep_alive(server: Any, _: aiohttp.ClientSession, __: Path) -> Outcome:
    reader, writer = await asyncio.open_connection(HOST, server.port)
    try:
        writer.write(HEALTH)
        first = await _one_response(reader)
        await asyncio.sleep(8)  # longer than the head deadline, as a pooled connection idles
        writer.write(HEALTH)
        try:
            second = await asyncio.wait_for(_one_response(reader), 10)
        except (asyncio.IncompleteReadError, ConnectionResetError, TimeoutError):
            second = 0
    finally:
        writer.close()
    return f"one connection: {first}, idle 8 s, then {second or 'closed'}", second == 200


async def connection_cap(server: Any, _: aiohttp.ClientSession, __: Path) -> Outcome:
    """Run with MEMORY_PLUGIN_MAX_CONNECTIONS=50 (see SERVER_OPTIONS)."""
    kept = [await asyncio.open_connection(HOST, server.port) for _ in range(CAP)]
    try:
        for reader, writer in kept:
            writer.write(HEALTH)
            await _one_response(reader)
        received, seconds = await _send_alone(server.port, CLOSING_HEALTH)
        extra = (
            f"still open after {seconds:.0f} s"
            if received is None
            else f"answered {_answer(received)[0]}"
            if received
            else f"closed unanswered after {seconds:.2f} s"
        )
        answered = 0
        for reader, writer in kept:
            writer.write(HEALTH)
            answered += await _one_response(reader) == 200
    finally:
        for _, writer in kept:
            writer.close()
    ok = received == b"" and answered == CAP
    return (
        f"connection {CAP + 1} of a cap of {CAP}: {extra}; open ones answered {answered}/{CAP}",
        ok,
    )


async def descriptors_exhausted(server: Any, _: aiohttp.ClientSession, __: Path) -> Outcome:
    """Run with `ulimit -n 256` (see SERVER_OPTIONS): accepts fail with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(FLOOD + 100, hard), hard))
    started = time.monotonic()
    socks = half_open(server.port, FLOOD)
    await asyncio.sleep(5)
    for sock in socks:
        sock.close()
    await asyncio.sleep(2)  # a suppressed count is reported once its window ends
    seconds = time.monotonic() - started
    lines = log_lines(server)
    accept = sum(line["msg"].startswith("socket.accept() out of") for line in lines)
    suppressed = sum(line.get("suppressed", 0) for line in lines if "suppressed" in line)
    received, _ = await _send_alone(server.port, CLOSING_HEALTH)
    health = _answer(received)[0]
    ok = 0 < accept <= 3 * (seconds + 2) and suppressed > 0 and health == 200
    observed = (
        f"{FLOOD} connections, {FLOOD_FDS} descriptors, {seconds:.0f} s: {len(lines)} log lines "
        f"({accept} accept errors, {suppressed} counted as suppressed); health after {health}"
    )
    return observed, ok


CASES = {
    "12 request line 9 KB": long_request_line,
    "13 slow clients": slow_clients,
    "14 idle keep-alive": idle_keep_alive,
    "15 connection cap": connection_cap,
    "16 descriptors exhausted": descriptors_exhausted,
}
# Per case: extra environment for the server, and its open-file limit (None: inherited).
SERVER_OPTIONS: dict[str, tuple[dict[str, str], int | None]] = {
    "15 connection cap": ({"MEMORY_PLUGIN_MAX_CONNECTIONS": str(CAP)}, None),
    "16 descriptors exhausted": ({}, FLOOD_FDS),
}
