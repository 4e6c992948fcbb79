"""The connection layer over real TCP: aiohttp's own errors
in the envelope, read deadlines, keep-alive, the connection cap.

Every case talks to a real server process through raw sockets (`harness/raw_http.py`),
because what is tested happens before any request reaches the app. Time bounds are
generous (a deadline plus `SLACK_S`): a test fails when a connection is held, not
when a machine is slow. The log flood is in test_log_flood.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.raw_http import HEALTH
from harness.raw_http import SLACK_S
from harness.raw_http import connect
from harness.raw_http import exchange
from harness.raw_http import log_lines
from harness.raw_http import one_response
from harness.raw_http import parse
from harness.raw_http import peer
from harness.raw_http import serve
from harness.raw_http import until_closed
from harness.server_process import ServerProcess

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
KEEPALIVE_TIMEOUT_S = 4.0
SECRET = "zq-secret-path"  # must never come back in an answer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = serve(
        tmp_path_factory.mktemp("connections"),
        {
            "MEMORY_PLUGIN_HEADER_TIMEOUT": str(HEADER_TIMEOUT_S),
            "MEMORY_PLUGIN_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
            "MEMORY_PLUGIN_KEEPALIVE_TIMEOUT": str(KEEPALIVE_TIMEOUT_S),
        },
    )
    yield process
    process.close()


# -- what aiohttp answers itself is the envelope, and echoes nothing ---------------------


def refused(message: str) -> dict[str, str]:
    """The envelope's error object for a request the server cannot parse."""
    return {"code": "bad_request", "message": message}


TOO_LONG = refused("request line or header longer than 8190 bytes")
MALFORMED = refused("malformed HTTP request")
NOT_HTTP = refused("malformed HTTP request: unknown method, or not HTTP at all")
NO_EXPECT = refused("unsupported Expect header (only 100-continue is understood)")
BAD_TARGET = refused("malformed request target")
GET_HEALTH, POST_SEARCH = "GET /v1/health HTTP/1.1", "POST /v1/search HTTP/1.1"
LONG = "a" * 9000


def head(request_line: str, header: str = "") -> bytes:
    """A request's head: its request line, `Host: x`, and `header` when given."""
    headers = ["Host: x", header] if header else ["Host: x"]
    return "\r\n".join([request_line, *headers, "", ""]).encode()


# What aiohttp refuses before the app sees it, by case: the request, the error object.
REFUSED = {
    "request line over 8190 bytes": (head(f"GET /v1/health?{SECRET}={LONG} HTTP/1.1"), TOO_LONG),
    "header over 8190 bytes": (head(GET_HEALTH, f"X-Big: {SECRET}{'b' * 9000}"), TOO_LONG),
    "NUL in a header": (head(GET_HEALTH, f"X-A: {SECRET}\x00"), MALFORMED),
    "bad Content-Length": (head(POST_SEARCH, f"Content-Length: {SECRET}"), MALFORMED),
    "unknown HTTP version": (head(f"GET /{SECRET} HTTP/9.9"), refused("malformed request line")),
    "not HTTP": (f"{SECRET} hello\r\n\r\n".encode(), NOT_HTTP),
    "bad request target": (head(f"GET http://[::1/{SECRET} HTTP/1.1"), BAD_TARGET),
    "unknown Expect": (head(GET_HEALTH, f"Expect: {SECRET}"), NO_EXPECT),
}


@pytest.mark.parametrize(("request_bytes", "expected"), list(REFUSED.values()), ids=list(REFUSED))
def test_what_aiohttp_refuses_itself_is_the_envelope(
    server: ServerProcess, request_bytes: bytes, expected: dict[str, str]
) -> None:
    raw = exchange(server, request_bytes)
    assert SECRET.encode() not in raw
    status, headers, body = parse(raw)
    assert (status, headers["content-type"], json.loads(body)) == (
        417 if "Expect" in expected["message"] else 400,
        "application/json; charset=utf-8",
        expected,
    )


# -- read deadlines, keep-alive, the connection cap --------------------------------------


def test_a_client_that_sends_half_a_head_is_closed_and_logged_once(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # no blank line: never done
        received, seconds = until_closed(sock, HEADER_TIMEOUT_S + SLACK_S)
        address = peer(sock)
    assert received == b""
    assert seconds >= HEADER_TIMEOUT_S * 0.9
    time.sleep(0.2)
    lines = [line for line in log_lines(server) if line.get("peer") == address]
    assert [(line["level"], line["msg"], line["timeout_s"]) for line in lines] == [
        ("info", "closed a slow client: no complete request head in time", HEADER_TIMEOUT_S)
    ]


def test_a_client_that_sends_nothing_is_closed(server: ServerProcess) -> None:
    with connect(server) as sock:
        received, _ = until_closed(sock, HEADER_TIMEOUT_S + SLACK_S)
    assert received == b""


def test_a_client_that_sends_half_a_body_gets_408_and_is_closed(server: ServerProcess) -> None:
    head = (
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    )
    with connect(server) as sock:
        sock.sendall(head.encode() + b'{"namespaces": ')
        raw, _ = until_closed(sock, BODY_TIMEOUT_S + SLACK_S)
        address = peer(sock)
    status, headers, body = parse(raw)
    assert (status, headers["connection"], json.loads(body)) == (
        408,
        "close",
        {
            "code": "bad_request",
            "message": f"request body not received within {BODY_TIMEOUT_S:g} s",
        },
    )
    time.sleep(0.2)
    slow = [line["msg"] for line in log_lines(server) if line.get("peer") == address]
    assert slow == ["closed a slow client: request body not received in time"]


def test_keep_alive_outlives_the_header_timeout_and_ends_at_its_own(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        sock.sendall(HEALTH)
        assert one_response(sock)[0] == 200
        time.sleep(HEADER_TIMEOUT_S * 2.5)  # idle between requests, as a pooled connection
        sock.sendall(HEALTH)
        assert one_response(sock)[0] == 200
        received, seconds = until_closed(sock, KEEPALIVE_TIMEOUT_S + SLACK_S)
    assert received == b""
    assert seconds >= KEEPALIVE_TIMEOUT_S * 0.9


def test_beyond_the_cap_new_connections_are_closed_and_open_ones_kept(tmp_path: Path) -> None:
    cap = 4
    server = serve(
        tmp_path, {"MEMORY_PLUGIN_MAX_CONNECTIONS": str(cap), "MEMORY_PLUGIN_HEADER_TIMEOUT": "60"}
    )
    try:
        kept = [connect(server) for _ in range(cap)]
        for sock in kept:
            sock.sendall(HEALTH)
            assert one_response(sock)[0] == 200
        with connect(server) as extra:
            extra.sendall(HEALTH)
            received, _ = until_closed(extra, SLACK_S)
        assert received == b""
        for sock in kept:  # untouched, still kept alive
            sock.sendall(HEALTH)
            assert one_response(sock)[0] == 200
        kept.pop().close()
        deadline = time.monotonic() + SLACK_S
        while True:  # the freed place is taken once the server has seen the close
            with connect(server) as again:
                again.sendall(HEALTH)
                try:
                    assert one_response(again)[0] == 200
                    break
                except (AssertionError, ConnectionResetError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        for sock in kept:
            sock.close()
        refused = [
            line
            for line in log_lines(server)
            if line["msg"] == "refused a connection: too many open connections"
        ]
        assert refused
        assert refused[0]["max_connections"] == cap
    finally:
        server.close()
