"""SIGTERM under load: stop accepting, finish what is in flight, flush, exit 0 fast.

A real server process with the embedded store. Twenty commits are in flight
when SIGTERM arrives: one goes first, nineteen follow while it is being
embedded (so they share the next batch, which takes a few hundred ms), and the
signal goes when the first is answered. One more request is stuck mid-upload.
Expected, and documented in docs/observability.md:
- every commit the server had received gets its normal 201, some of them
  completing after the server logged "stopping";
- new connections are refused right after the signal, long before the exit;
- the stuck upload keeps the drain going for the whole grace period, then is
  cut with no answer at all;
- the process logs "stopping" and "stopped" and exits 0 in under 10 s;
- after a restart on the same data directory, every 201'd memory is there.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.server_process import HOST
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess
from plugin.commands.serve import SHUTDOWN_GRACE_S

NS = "workspace:shutdown"
COMMITS = 20
EXIT_WITHIN_S = 10.0
# A word-heavy text: the batch of nineteen takes long enough to be cut off
# by a naive shutdown.
FILLER = " ".join(f"word{i}" for i in range(150))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    # A generous backend deadline: on a busy 2-core machine a batch of long
    # texts may take more than 1.5 s, and a 503 is not what this test is about.
    process = ServerProcess(
        tmp_path / "data",
        tmp_path / "server.log",
        log_level="INFO",
        env={"MEMORY_PLUGIN_BACKEND_TIMEOUT": "10", **WIDE_SHARES},
    )
    yield process
    process.close()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def stalled_upload(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A commit whose body stops after ten bytes: in flight, and never complete."""
    body = json.dumps({"content": "never finished", "kind": "fact", "source": "agent"})
    head = (
        f"POST /v1/namespaces/{NS}/memories HTTP/1.1\r\nHost: {HOST}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(head.encode() + body[:10].encode())
    await writer.drain()
    return reader, writer


async def refused_after(port: int, limit_s: float = 3.0) -> float:
    """When a new connection was first refused (polled every 10 ms)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            _, writer = await asyncio.open_connection(HOST, port)
        except (ConnectionRefusedError, ConnectionResetError):  # reset: caught mid-close
            return time.monotonic()
        writer.close()
        await asyncio.sleep(0.01)
    raise AssertionError(f"new connections still accepted {limit_s:g} s after SIGTERM")


@pytest.mark.slow
async def test_sigterm_finishes_in_flight_requests_and_exits_0(server: ServerProcess) -> None:
    server.start()
    await asyncio.to_thread(server.wait_healthy)
    assert server.proc is not None
    url = server.base_url
    contents = [f"in-flight memory {i}: {FILLER}" for i in range(COMMITS)]
    answered: list[tuple[int, Any]] = []

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async with session.put(f"{url}/v1/namespaces/{NS}", json={"kind": "workspace"}) as r:
            assert r.status == 200
        # Open the connections first, so every commit below reaches the server at once.
        await asyncio.gather(*(session.get(f"{url}/v1/health") for _ in range(COMMITS)))
        stuck_reader, stuck_writer = await stalled_upload(server.port)

        async def commit(content: str) -> None:
            body = {"content": content, "kind": "fact", "source": "agent"}
            async with session.post(f"{url}/v1/namespaces/{NS}/memories", json=body) as r:
                answered.append((r.status, await r.json()))

        first = asyncio.create_task(commit(contents[0]))
        await asyncio.sleep(0.02)  # the first is being embedded
        rest = [asyncio.create_task(commit(content)) for content in contents[1:]]
        await asyncio.sleep(0.05)  # the rest have reached the server
        await first
        os.kill(server.proc.pid, signal.SIGTERM)
        signalled = time.monotonic()
        refused = await refused_after(server.port)
        await asyncio.gather(*rest)
        exit_code = await asyncio.to_thread(server.proc.wait, 30)
        exited = time.monotonic()
        stuck_answer = await stuck_reader.read()
        stuck_writer.close()

    assert exit_code == 0
    assert exited - signalled < EXIT_WITHIN_S, f"took {exited - signalled:.1f} s to exit"
    assert [status for status, _ in answered] == [201] * COMMITS
    assert all(body["namespace"] == NS for _, body in answered)
    assert refused - signalled < 1.0, "kept accepting new connections after SIGTERM"
    assert exited - signalled > SHUTDOWN_GRACE_S - 0.5, "did not wait for the stuck upload"
    assert stuck_answer == b"", "the stuck upload should be cut without an answer"

    lines = json_lines(server.log_text())
    messages = [line["msg"] for line in lines]
    stop_at = next(i for i, m in enumerate(messages) if m.startswith("stopping"))
    assert (lines[stop_at]["signal"], lines[stop_at]["grace_s"]) == ("SIGTERM", SHUTDOWN_GRACE_S)
    commits_after = [
        line
        for line in lines[stop_at:]
        if line["msg"] == "request" and line["route"] == "/v1/namespaces/{name}/memories"
    ]
    assert commits_after, "no commit was still in flight when the server began to stop"
    assert {line["status"] for line in commits_after} == {201}
    aborted = [line for line in lines if line["msg"] == "request aborted"]
    assert [(a["route"], a["namespace"], a["status"]) for a in aborted] == [
        ("/v1/namespaces/{name}/memories", NS, None)
    ]
    assert messages[-1] == "stopped"

    # Everything that was acknowledged survived the shutdown.
    server.start()
    await asyncio.to_thread(server.wait_healthy)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/search", json={"namespaces": [NS], "limit": 100}) as r,
    ):
        stored = (await r.json())["memories"]
    assert sorted(m["id"] for m in stored) == sorted(body["id"] for _, body in answered)
    assert sorted(m["content"] for m in stored) == sorted(contents)
    assert server.terminate() == 0
