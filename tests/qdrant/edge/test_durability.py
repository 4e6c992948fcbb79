"""Acknowledged writes survive `kill -9` of the real server process.

The embedded backend (qdrant-edge) appends each update to its write-ahead log
before `update()` returns, and the namespace record is fsynced before the PUT
answers. So anything that got its 201 (or 204) must be there after a SIGKILL
sent the moment the last answer arrived, with no flush, no shutdown hook.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.server_process import ServerProcess

pytestmark = pytest.mark.slow

NAMESPACE = "workspace:durability-1"
StartServer = Callable[[Path], ServerProcess]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start a server on a data dir and wait until healthy; all are killed at teardown."""
    started: list[ServerProcess] = []

    def start(data_dir: Path) -> ServerProcess:
        log = tmp_path / f"server-{len(started)}.log"
        server = ServerProcess(data_dir, log)
        started.append(server)
        server.start()
        server.wait_healthy()
        return server

    yield start
    for server in started:
        server.close()


async def _call(
    session: aiohttp.ClientSession, server: ServerProcess, method: str, path: str, body: Any
) -> tuple[int, Any]:
    async with session.request(method, server.base_url + path, json=body) as response:
        text = await response.text()
        return response.status, (await response.json() if text else None)


async def _commit(
    session: aiohttp.ClientSession, server: ServerProcess, content: str, **fields: Any
) -> str:
    body = {"content": content, "kind": "fact", "source": "agent", **fields}
    status, reply = await _call(
        session, server, "POST", f"/v1/namespaces/{NAMESPACE}/memories", body
    )
    assert status == 201, (status, reply, server.log_tail())
    return str(reply["id"])


async def _listing(session: aiohttp.ClientSession, server: ServerProcess) -> dict[str, str]:
    status, reply = await _call(
        session, server, "POST", "/v1/search", {"namespaces": [NAMESPACE], "limit": 100}
    )
    assert status == 200, (status, reply, server.log_tail())
    contents = {m["id"]: m["content"] for m in reply["memories"]}
    assert len(contents) == len(reply["memories"]), "an id was returned twice"
    return contents


async def test_acknowledged_writes_survive_sigkill(
    tmp_path: Path, start_server: StartServer
) -> None:
    data_dir = tmp_path / "data"
    explicit = str(uuid.uuid4())
    expected: dict[str, str] = {}

    server = start_server(data_dir)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        status, _ = await _call(
            session, server, "PUT", f"/v1/namespaces/{NAMESPACE}", {"kind": "workspace"}
        )
        assert status == 200
        for n in range(4):
            content = f"the deploy of service {n} happens on day {n + 1}"
            expected[await _commit(session, server, content)] = content
        doomed = await _commit(session, server, "this one is forgotten before the crash")
        status, _ = await _call(
            session,
            server,
            "DELETE",
            f"/v1/memories/{doomed}",
            {"requested_by_namespace": NAMESPACE},
        )
        assert status == 204
        await _commit(session, server, "first version of the backfilled row", id=explicit)
        await _commit(session, server, "second version of the backfilled row", id=explicit)
        server.kill()  # SIGKILL at once: no flush, no shutdown hooks
    assert server.proc is not None
    assert server.proc.returncode == -9
    expected[explicit] = "second version of the backfilled row"

    restarted = start_server(data_dir)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        assert await _listing(session, restarted) == expected
        # Recovered state takes new writes, and those survive a second crash too.
        content = "user prefers tabs over spaces"
        expected[await _commit(session, restarted, content)] = content
        await _commit(session, restarted, "third version of the backfilled row", id=explicit)
        restarted.kill()
    expected[explicit] = "third version of the backfilled row"

    again = start_server(data_dir)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        assert await _listing(session, again) == expected
    assert again.terminate() == 0, again.log_tail()
