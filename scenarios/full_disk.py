"""Damage and a full disk for scenarios/__main__.py."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from scenarios.hostile_input import commit
from scenarios.hostile_input import memory_body
from scenarios.hostile_input import put_ns

Outcome = tuple[str, bool]


async def damaged_record(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    base = server.base_url
    for name in ("workspace:good", "workspace:bad"):
        await put_ns(session, base, name)
        await commit(session, base, name, memory_body(f"memory of {name}"))
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
    status, _ = await commit(session, base, "workspace:bad", memory_body("x"))
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
    await put_ns(session, base, "workspace:seg")
    for i in range(20):
        await commit(session, base, "workspace:seg", memory_body(f"memory {i}"))
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
    await put_ns(session, base, "workspace:full")
    status, _ = await commit(session, base, "workspace:full", memory_body("before the disk fills"))
    filler = data / "filler"
    _fill(filler)
    statuses: Counter[int] = Counter()
    for i in range(40):
        try:
            status, _ = await commit(
                session, base, "workspace:full", memory_body(f"full {i} " * 50)
            )
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
        after, _ = await commit(session, base, "workspace:full", memory_body("after space returns"))
    ok = alive and 201 not in statuses and set(statuses) <= {503, 507} and after == 201
    return f"alive {alive}, writes {dict(statuses)}, health {health}, write after {after}", ok


CASES = {
    "1 disk full": disk_full,
    "2 damaged record": damaged_record,
    "3 damaged segment": damaged_segment,
}
