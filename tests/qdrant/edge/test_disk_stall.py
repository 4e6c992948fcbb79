"""A disk that stops answering: health says so, reads go on, writes fail in time, none is lost.

The real server runs on the power-cut filesystem (tests/support/power_cut_fs.py), stalled
for the middle of 10 s of writes and searches: every `fsync` waits, as on a network
volume that hangs. Health is asked throughout: `degraded`, naming the disk, within 3 s of
the stall and until it ends, `ok` again within 3 s of its end. Every search answers 200;
every commit answers within the platform's 2 s (201, or 503 `unavailable` while the disk
is away, until the syncs that waited have gone through: at the 1.5 s deadline, or at once
when it came after the sync had stalled). The metrics show the sync waiting and the writes
it refused. Then the power is cut: every acknowledged memory is there after the restart.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from adapters.store_files import SHARD_COUNT
from adapters.store_files import shard_index
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess
from tests.support.backends import copy_of
from tests.support.power_cut import PowerCutMount
from tests.support.power_cut import unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.skipif(unavailable() is not None, reason=f"no power cut here: {unavailable()}"),
]

STALL_FROM_S, STALL_S = 2.0, 4.0  # the stall begins 2 s in and lasts 4 s
AFTER_S = 4.0  # the run goes on this long after the stall ends
WITHIN_S = 3.0  # health follows the disk within this, either way
# The syncs that waited go through within this of the disk's return (the filesystem notices it
# by polling, then each sync completes): until then the plugin still sees the stall.
RESUME_S = 1.0
PLATFORM_TIMEOUT_S = 2.0  # no answer may take longer: the platform's client gives up
WRITERS = SEARCHERS = 4
PAUSE_S = 0.05  # between one caller's requests: leave the two cores some room
CREATE = {"kind": "workspace"}
MEMORY = {"kind": "fact", "source": "agent"}


def names_in_one_shard(count: int) -> list[str]:
    """Namespaces of one shard: the filesystem is slow to create a shard's log."""
    names = (f"workspace:stall-{n}" for n in range(10_000))
    return [name for name in names if shard_index(name, SHARD_COUNT) == 0][:count]


NAMES = names_in_one_shard(WRITERS)


@dataclass
class Answer:
    at: float  # seconds into the run when the request was sent
    took: float
    status: int
    body: dict[str, object]


@pytest.fixture
def mount(tmp_path: Path, empty_store: Path) -> Iterator[PowerCutMount]:
    """The disk, holding a new empty store made off the mount (its shards' logs would take
    most of a minute to create through a filesystem in Python)."""
    copy_of(empty_store, tmp_path / "disk" / "data")
    mount = PowerCutMount(tmp_path / "disk", tmp_path / "mnt", tmp_path / "fs.log")
    yield mount
    mount.cut()


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """The servers a test starts, killed at teardown whatever its outcome."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.close()


def start(mount: PowerCutMount, log: Path) -> ServerProcess:
    mount.mount()
    server = ServerProcess(mount.mountpoint / "data", log, env=WIDE_SHARES).start()
    server.wait_healthy(60)
    return server


async def ask(
    session: aiohttp.ClientSession, method: str, url: str, body: object, t0: float
) -> Answer:
    sent = time.monotonic()
    async with session.request(method, url, json=body) as response:
        text = await response.text()
    took = time.monotonic() - sent
    return Answer(sent - t0, took, response.status, json.loads(text) if text else {})


async def until_ok(session: aiohttp.ClientSession, method: str, url: str, body: object) -> None:
    """Retry until 2xx: the first write to a new shard on this filesystem takes seconds."""
    for _ in range(60):
        async with session.request(method, url, json=body) as response:
            if response.status < 300:
                return
            assert response.status >= 500, (response.status, await response.text())
        await asyncio.sleep(0.5)
    raise AssertionError(f"{method} {url} never succeeded")


@dataclass
class Stall:
    """When the disk stalled, in seconds into the run, as it happened (a busy machine
    starts it late): asked for, begun, about to end, ended."""

    asked: float = 0.0
    began: float = 0.0
    ending: float = 0.0
    ended: float | None = None


async def run(
    session: aiohttp.ClientSession, base: str, mount: PowerCutMount
) -> tuple[list[Answer], list[Answer], list[Answer], dict[str, set[str]], str, Stall]:
    """Commits, searches and health checks, the disk stalled in the middle; what each
    answered, the acknowledged ids by namespace, /metrics late in the stall, and when the
    stall was."""
    t0 = time.monotonic()
    commits: list[Answer] = []
    searches: list[Answer] = []
    health: list[Answer] = []
    acknowledged: dict[str, set[str]] = {name: set() for name in NAMES}
    when = Stall()

    def now() -> float:
        return time.monotonic() - t0

    def running() -> bool:
        return when.ended is None or now() < when.ended + AFTER_S

    async def writer(name: str) -> None:
        while running():
            memory_id = str(uuid.uuid4())
            body = {"id": memory_id, "content": f"note {memory_id}", **MEMORY}
            answer = await ask(session, "POST", f"{base}/v1/namespaces/{name}/memories", body, t0)
            commits.append(answer)
            if answer.status == 201:
                acknowledged[name].add(memory_id)
            await asyncio.sleep(PAUSE_S)

    async def searcher(n: int) -> None:
        body = {"namespaces": NAMES, "query": f"which note is {n}", "limit": 5}
        while running():
            searches.append(await ask(session, "POST", f"{base}/v1/search", body, t0))
            await asyncio.sleep(PAUSE_S)

    async def prober() -> None:
        while running():
            health.append(await ask(session, "GET", f"{base}/v1/health", None, t0))
            await asyncio.sleep(0.2)

    async def stall() -> str:
        await asyncio.sleep(STALL_FROM_S)
        when.asked = now()
        mount.stall()
        when.began = now()
        await asyncio.sleep(STALL_S - 0.5)
        async with session.get(f"{base}/metrics") as response:
            metrics = await response.text()
        await asyncio.sleep(max(0.0, when.began + STALL_S - now()))
        when.ending = now()
        mount.resume()
        when.ended = now()
        return metrics

    callers = [writer(name) for name in NAMES] + [searcher(n) for n in range(SEARCHERS)]
    metrics = (await asyncio.gather(*callers, prober(), stall()))[-1]
    assert isinstance(metrics, str)
    return commits, searches, health, acknowledged, metrics, when


def sample(metrics: str, name: str) -> float:
    return float(next(line for line in metrics.splitlines() if line.startswith(name)).split()[-1])


async def test_a_stalled_disk_is_health_degraded_while_reads_go_on_and_nothing_is_lost(
    mount: PowerCutMount, tmp_path: Path, servers: list[ServerProcess]
) -> None:
    server = await asyncio.to_thread(start, mount, tmp_path / "server-1.log")
    servers.append(server)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        base = server.base_url
        for name in NAMES:
            await until_ok(session, "PUT", f"{base}/v1/namespaces/{name}", CREATE)
            body = {"id": str(uuid.uuid4()), "content": "first", **MEMORY}
            await until_ok(session, "POST", f"{base}/v1/namespaces/{name}/memories", body)

        commits, searches, health, acknowledged, metrics, when = await run(session, base, mount)
        async with session.get(f"{base}/metrics") as response:
            after = await response.text()
    log = server.log_tail()

    assert when.ended is not None
    stalled = [a for a in health if when.began + WITHIN_S <= a.at < when.ending]
    before = [a for a in health if a.at < when.asked]
    recovered = [a for a in health if a.at >= when.ended + WITHIN_S]
    timeline = [(round(a.at, 1), a.status, a.body["status"]) for a in health]
    assert stalled, timeline
    assert before, timeline
    assert recovered, timeline
    assert all(a.status == 200 and a.body["status"] == "ok" for a in before), timeline
    for answer in stalled:
        assert answer.status == 200, timeline
        assert answer.body["status"] == "degraded", timeline
        assert "writes cannot reach the disk" in str(answer.body["message"]), answer
    assert all(a.body["status"] == "ok" for a in recovered), timeline

    assert all(a.status == 200 for a in searches), [a for a in searches if a.status != 200]
    assert any(when.began < a.at < when.ending - 1 for a in searches)  # served in the stall
    slow = [a for a in commits + searches + health if a.took >= PLATFORM_TIMEOUT_S]
    assert not slow, slow
    refused = [a for a in commits if a.status != 201]
    assert refused, "no commit was refused in the stall"
    assert all(a.status == 503 and a.body["code"] == "unavailable" for a in refused), refused
    outside = [a for a in refused if not when.asked - 1.5 < a.at < when.ended + RESUME_S]
    assert not outside, (when, outside)  # every commit sent after that was acknowledged
    assert any(a.status == 201 and a.at > when.ended for a in commits)  # served again

    assert sample(metrics, "memory_plugin_store_sync_waiting_seconds") > 1.5, metrics
    assert sample(after, "memory_plugin_store_sync_waiting_seconds") < 1.5, after
    timeouts = 'memory_plugin_store_writes_refused_total{reason="sync_timeout"}'
    assert sample(after, timeouts) >= 1, after
    kept_out = 'memory_plugin_store_writes_refused_total{reason="disk_stalled"}'
    assert sample(after, kept_out) >= 1, after  # refused at once, kept out of the engine
    assert sample(after, "memory_plugin_store_sync_duration_seconds_count") > 0, after

    # The power goes: whatever was acknowledged was on disk.
    await asyncio.to_thread(mount.cut)
    server.close()
    server = await asyncio.to_thread(start, mount, tmp_path / "server-2.log")
    servers.append(server)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{server.base_url}/admin/export") as response,
        ):
            assert response.status == 200, log
            lines = [json.loads(line) for line in (await response.text()).splitlines()]
    finally:
        server.terminate()
    found = {(line["namespace"], line["id"]) for line in lines if line["type"] == "memory"}
    lost = {(name, i) for name, ids in acknowledged.items() for i in ids} - found
    assert not lost, f"{len(lost)} acknowledged memories lost: {sorted(lost)[:5]}"
    assert sum(map(len, acknowledged.values())) > 0
