"""Raw HTTP over sockets against a real server process, for the connection tests.

What these tests look at happens before a request reaches the app (a request aiohttp
cannot parse, a head that never completes, a connection beyond the cap), so no HTTP
client library sits in between: bytes go out as written, and what comes back is read
until the server closes the connection, within a bound.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

from harness.server_process import HOST
from harness.server_process import ServerProcess

SLACK_S = 5.0  # how much later than its deadline a connection may close
HEALTH = f"GET /v1/health HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()


def serve(tmp: Path, env: dict[str, str], command: list[str] | None = None) -> ServerProcess:
    server = ServerProcess(tmp / "data", tmp / "server.log", log_level="INFO", env=env)
    if command is not None:
        server.command = command
    server.start()
    server.wait_healthy()
    return server


def connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection((HOST, server.port), timeout=30)


def half_open(port: int, count: int) -> list[socket.socket]:
    """`count` connections started without waiting for them: a flood of accepts."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect((HOST, port))
        socks.append(sock)
    return socks


def until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes; and after how many seconds."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"still open after {limit_s:g} s; got {received[:200]!r}") from None
    return received, time.monotonic() - started


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def one_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response on a kept-alive connection (framed by Content-Length)."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-response: {raw!r}"
        raw += chunk
    status, headers, body = parse(raw)
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return status, body


def exchange(server: ServerProcess, request: bytes) -> bytes:
    """Send `request` alone on a connection; the answer, which must close it."""
    with connect(server) as sock:
        sock.sendall(request)
        raw, _ = until_closed(sock, SLACK_S)
    return raw


def log_lines(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log_text().splitlines() if line.startswith("{")]


def peer(sock: socket.socket) -> str:
    """The client's address as the server logs it."""
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"
