"""`ServerProcess` believes only its own server: a port chosen free may be taken by another
process before the server binds it, and that process may answer health with a 200.

The other process here is a real HTTP server in a thread of the test, answering every GET
with a healthy body; the plugin is the real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.server_process import HOST
from harness.server_process import ServerError
from harness.server_process import ServerProcess
from harness.server_process import free_port
from harness.server_process import holds_any
from harness.server_process import listening_sockets
from harness.server_process import refusing_port

pytestmark = pytest.mark.slow


class AlwaysHealthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "impostor": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def impostor_on(port: int) -> Iterator[ThreadingHTTPServer]:
    http = ThreadingHTTPServer((HOST, port), AlwaysHealthy)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield http
    finally:
        http.shutdown()
        http.server_close()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process (this one) listens on and answers health on."""
    port = free_port()
    with impostor_on(port):
        yield port


def test_listening_sockets_name_the_listener_and_its_holder(taken_port: int) -> None:
    sockets = listening_sockets(taken_port)
    assert len(sockets) == 1
    assert holds_any(os.getpid(), sockets)
    assert not holds_any(os.getppid(), sockets)
    assert listening_sockets(free_port()) == set()


def test_a_refusing_port_refuses_and_cannot_be_taken() -> None:
    with refusing_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, port), timeout=5)
        with pytest.raises(OSError, match=r"(?i)address already in use"):
            ThreadingHTTPServer((HOST, port), AlwaysHealthy)


def test_a_given_port_that_another_process_answers_on_is_not_health(
    tmp_path: Path, taken_port: int
) -> None:
    server = ServerProcess(tmp_path / "data", tmp_path / "server.log", port=taken_port)
    try:
        server.start()
        with pytest.raises(ServerError, match=r"(?i)address already in use"):
            server.wait_healthy(60)
        assert server.port == taken_port  # a caller's port is not moved
    finally:
        server.close()


def test_a_chosen_port_taken_before_the_bind_moves_the_server_to_another(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path / "data", tmp_path / "server.log")
    chosen = server.port
    try:
        with impostor_on(chosen):  # taken between the choice and the bind
            server.start()
            server.wait_healthy(60)
            assert server.port != chosen
            with urllib.request.urlopen(f"{server.base_url}/v1/health", timeout=5) as answer:
                body = json.loads(answer.read())
            assert "impostor" not in body
            assert body["status"] == "ok"
            assert "address already in use" in server.log_text().lower()
    finally:
        server.close()
