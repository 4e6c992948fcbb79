"""Hostile input and faults against the real server: one line per case, what it answered.

    python -m benchmarks.faults            # this checkout
    python -m benchmarks.faults --repo DIR  # another checkout (e.g. a worktree of an
                                            # older commit), for before/after figures

Each case drives a fresh server process (`tests/support/server_process.py`) over real
HTTP and prints what happened and whether that is what the contract intends
(`ok`) or not (`FAIL`). The disk-full case needs root (it mounts a small tmpfs)
and is skipped otherwise. The unit tests hold the same cases as assertions; this
script exists to show an operator, or a closing note, the before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.faults_connections import CASES as CONNECTION_CASES
from benchmarks.faults_connections import SERVER_OPTIONS
from benchmarks.faults_store import CASES as STORE_CASES

REPO_ROOT = Path(__file__).resolve().parents[1]
NS = "/v1/namespaces/"
Outcome = tuple[str, bool]
Case = Callable[[Any, aiohttp.ClientSession, Path], Awaitable[Outcome]]


async def _put(session: aiohttp.ClientSession, base: str, name: str, **body: Any) -> int:
    async with session.put(f"{base}{NS}{name}", json={"kind": "workspace", **body}) as r:
        await r.read()
        return r.status


async def _commit(
    session: aiohttp.ClientSession, base: str, name: str, body: Any, **kwargs: Any
) -> tuple[int, str]:
    kwargs.setdefault("json", body)
    async with session.post(f"{base}{NS}{name}/memories", **kwargs) as r:
        return r.status, await r.text()


def _memory(content: str = "a fact", **extra: Any) -> dict[str, Any]:
    return {"content": content, "kind": "fact", "source": "agent", **extra}


async def numbers(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await _put(session, base, "workspace:n")
    raw = '{"content":"x","kind":"fact","source":"agent","propagation":{"a":1e400}}'
    s1, _ = await _commit(
        session, base, "workspace:n", None, data=raw, headers={"Content-Type": "application/json"}
    )
    async with session.put(
        f"{base}{NS}workspace:n2",
        data='{"kind":"workspace","metadata":{"a":1e400}}',
        headers={"Content-Type": "application/json"},
    ) as r:
        s2, t2 = r.status, await r.text()
    big = 2**70
    memory_id = "7f3e2a10-0000-4000-8000-000000000001"
    raw = json.dumps(_memory(id=memory_id, propagation={"big": big, "neg": -(2**65)}))
    s3, _ = await _commit(
        session, base, "workspace:n", None, data=raw, headers={"Content-Type": "application/json"}
    )
    async with session.post(f"{base}/v1/search", json={"namespaces": ["workspace:n"]}) as r:
        found = [m["propagation"] for m in (await r.json(loads=json.loads))["memories"]]
    kept = {"big": big, "neg": -(2**65)} in found
    ok = s1 == 400 and s2 == 400 and _strict_json(t2) and s3 == 201 and kept
    return f"1e400 commit {s1}, 1e400 PUT {s2}; 2**70 returned as sent: {kept}", ok


def _strict_json(text: str) -> bool:
    """Whether `text` is JSON without the NaN/Infinity extensions Python accepts."""

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


async def times(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    statuses = []
    for when in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00"):
        statuses.append(await _put(session, base, "workspace:t", expires_at=when))
        await _put(session, base, "workspace:t")
        status, _ = await _commit(session, base, "workspace:t", _memory(expires_at=when))
        statuses.append(status)
    return f"PUT/commit statuses {statuses}", all(s < 500 for s in statuses)


async def large_content(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await _put(session, base, "workspace:big")
    big = ("all work and no play makes the agent a dull agent. " * 18_000)[: 900 * 1024]

    async def small() -> float:
        started = time.perf_counter()
        await _commit(session, base, "workspace:big", _memory("a small fact"))
        return time.perf_counter() - started

    await small()
    alone = min([await small() for _ in range(5)])
    big_task = asyncio.create_task(_commit(session, base, "workspace:big", _memory(big)))
    await asyncio.sleep(0.01)
    beside = await small()
    big_status, _ = await big_task
    ok = big_status == 201 and beside < alone + 0.15
    return f"900 KiB commit {big_status}; small commit beside it {beside * 1000:.0f} ms", ok


async def put_racing_delete(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url

    async def delete() -> tuple[int, str]:
        async with session.delete(f"{base}{NS}workspace:race") as r:
            return r.status, await r.text()

    async def put() -> tuple[int, str]:
        async with session.put(f"{base}{NS}workspace:race", json={"kind": "workspace"}) as r:
            return r.status, await r.text()

    results = await asyncio.gather(*[put() if i % 2 else delete() for i in range(150)])
    statuses = Counter(status for status, _ in results)
    leaks = sum("/" in json.loads(text).get("message", "") for s, text in results if s >= 400)
    ok = all(s in (200, 204, 404) for s in statuses) and leaks == 0
    return f"statuses {dict(statuses)}, bodies naming a path {leaks}", ok


async def first_puts(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url

    async def put() -> str:
        async with session.put(f"{base}{NS}workspace:first", json={"kind": "workspace"}) as r:
            return str((await r.json())["created_at"])

    created = set(await asyncio.gather(*[put() for _ in range(50)]))
    return f"50 concurrent first PUTs answered {len(created)} created_at values", len(created) == 1


async def hang_up(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await _put(session, base, "workspace:h")
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(
                b"POST /v1/namespaces/workspace:h/memories HTTP/1.1\r\nHost: x\r\n"
                b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"content":'
            )
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    async with session.get(f"{base}/metrics") as r:
        metrics = await r.text()
    five = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("memory_plugin_http_requests_total") and 'status="500"' in line
    )
    tracebacks = server.log_text().count("Traceback")
    ok = five == 0 and tracebacks == 0
    return f"3 hang-ups: counted as 500 {five:g} times, tracebacks in log {tracebacks}", ok


async def method_not_allowed(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    async with session.get(f"{server.base_url}/v1/search") as r:
        allow = r.headers.get("Allow")
        return f"GET /v1/search: {r.status}, Allow: {allow}", r.status == 405 and bool(allow)


async def burst(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await _put(session, base, "workspace:burst")
    body = _memory("the same memory, again", id="7f3e2a10-0000-4000-8000-00000000b0b0")
    results = await asyncio.gather(
        *[_commit(session, base, "workspace:burst", body) for _ in range(50)]
    )
    statuses = Counter(status for status, _ in results)
    return f"50 concurrent commits, same id: {dict(statuses)}", set(statuses) == {201}


async def damaged_record(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    base = server.base_url
    for name in ("workspace:good", "workspace:bad"):
        await _put(session, base, name)
        await _commit(session, base, name, _memory(f"memory of {name}"))
    server.terminate()
    db = sqlite3.connect(data / "store" / "namespaces.sqlite3")
    with db:
        db.execute("UPDATE namespaces SET record = '{broken' WHERE name = 'workspace:bad'")
    db.close()
    server.start()
    try:
        server.wait_healthy(30)
    except Exception:
        if not server.running:
            return "the plugin did not start", False
    async with session.get(f"{base}/v1/health") as r:
        health = r.status, await r.json()
    both = {"namespaces": ["workspace:good", "workspace:bad"], "query": "memory"}
    async with session.post(f"{base}/v1/search", json=both) as r:
        search = r.status, await r.text()
    status, _ = await _commit(session, base, "workspace:bad", _memory("x"))
    ok = search[0] == 200 and "workspace:good" in search[1] and status == 503
    return f"health {health[0]} {health[1].get('status')}, search {search[0]}, commit {status}", ok


def _smash(path: Path) -> None:
    with open(path, "r+b") as page:
        page.write(b"\xde\xad\xbe\xef" * 256)


def _fill(path: Path) -> None:
    """Write zeros to `path` until the volume has no block left."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M"], capture_output=True)


async def damaged_segment(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    """Damage the stored payload pages of the memory store, then the segment's manifest."""
    base = server.base_url
    await _put(session, base, "workspace:seg")
    for i in range(20):
        await _commit(session, base, "workspace:seg", _memory(f"memory {i}"))
    server.terminate()
    segment = next((data / "store" / "memories" / "segments").iterdir())
    _smash(segment / "payload_storage" / "page_0.dat")
    search = {"namespaces": ["workspace:seg"], "query": "memory"}
    server.start()
    server.wait_healthy(30)
    payload_statuses = []
    for _ in range(3):
        async with session.post(f"{base}/v1/search", json=search) as r:
            payload_statuses.append(r.status)
    server.terminate()
    (segment / "segment.json").write_text("{damaged")
    server.start()
    with contextlib.suppress(Exception):
        server.wait_healthy(20)
    if not server.running:
        return f"damaged payload: searches {payload_statuses}; damaged manifest: no start", False
    async with session.get(f"{base}/v1/health") as r:
        health = r.status
    async with session.post(f"{base}/v1/search", json=search) as r:
        after = r.status
    statuses = [*payload_statuses, health, after]
    observed = (
        f"damaged payload: searches {payload_statuses}; damaged manifest: health {health},"
        f" search {after}"
    )
    return observed, all(s == 503 for s in statuses[:3]) and health == 503 and after == 503


async def disk_full(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    base = server.base_url
    await _put(session, base, "workspace:full")
    status, _ = await _commit(session, base, "workspace:full", _memory("before the disk fills"))
    filler = data / "filler"
    _fill(filler)
    statuses: Counter[int] = Counter()
    for i in range(40):
        try:
            status, _ = await _commit(session, base, "workspace:full", _memory(f"full {i} " * 50))
            statuses[status] += 1
        except aiohttp.ClientError:
            statuses[-1] += 1
            break
    alive = server.running
    health = None
    if alive:
        async with session.get(f"{base}/v1/health") as r:
            health = r.status, (await r.json()).get("status")
    filler.unlink()
    after = None
    if alive:
        after, _ = await _commit(session, base, "workspace:full", _memory("after space returns"))
    ok = alive and 201 not in statuses and set(statuses) <= {503, 507} and after == 201
    return f"alive {alive}, writes {dict(statuses)}, health {health}, write after {after}", ok


CASES: dict[str, Case] = {
    "1 disk full": disk_full,
    "2 damaged record": damaged_record,
    "3 damaged segment": damaged_segment,
    "4 numbers": numbers,
    "5 extreme times": times,
    "6 large content": large_content,
    "7 PUT racing DELETE": put_racing_delete,
    "8 concurrent first PUTs": first_puts,
    "9 client hang-up": hang_up,
    "10 405 Allow": method_not_allowed,
    "11 burst, same id": burst,
    **CONNECTION_CASES,  # issue 21, items 7 to 9: benchmarks/faults_connections.py
    **STORE_CASES,  # issue 21, items 1 to 6: benchmarks/faults_store.py
}


@contextlib.contextmanager
def _data_dir(case: str) -> Any:
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        data = Path(tmp) / "data"
        if case != "1 disk full":
            yield data
            return
        data.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", str(data)], check=True)
        try:
            yield data
        finally:
            subprocess.run(["umount", "-l", str(data)], check=False)


async def _run_case(server: Any, case: Case, data: Path) -> Outcome:
    timeout = aiohttp.ClientTimeout(total=30)
    # No keep-alive: some cases restart the server under the session.
    connector = aiohttp.TCPConnector(force_close=True, limit=200)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        return await case(server, session, data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO_ROOT)
    parser.add_argument("cases", nargs="*", help="case numbers to run (default: all)")
    args = parser.parse_args()
    from tests.support import server_process
    from tests.support.server_process import ServerProcess

    server_process.REPO_ROOT = args.repo.resolve()  # the checkout whose server runs
    print(f"faults against {args.repo.resolve()}")
    for name, case in CASES.items():
        if args.cases and name.split()[0] not in args.cases:
            continue
        if name == "1 disk full" and (shutil.which("mount") is None or _not_root()):
            print(f"{name:<26} skipped: needs root to mount a tmpfs")
            continue
        env, open_files = SERVER_OPTIONS.get(name, ({}, None))
        command = None
        if open_files is not None:
            serve = f"{sys.executable} -m plugin.cli serve"
            command = ["sh", "-c", f"ulimit -n {open_files} && exec {serve}"]
        with (
            _data_dir(name) as data,
            ServerProcess(data, data.parent / "server.log", env=env, command=command) as server,
        ):
            server.start()
            server.wait_healthy()
            try:
                observed, ok = asyncio.run(_run_case(server, case, data))
            except Exception as error:
                observed, ok = f"probe error: {error!r}", False
            print(f"{name:<26} {'ok  ' if ok else 'FAIL'} {observed}", flush=True)


def _not_root() -> bool:
    import os

    return os.geteuid() != 0


if __name__ == "__main__":
    main()
