"""Store faults for scenarios/__main__.py: damage, full volumes.

Each case stops the server __main__.py started, prepares its own data directory
(filled through the checkout's own `import` command, so that an older checkout
can be measured the same way), damages it as a bad disk or a careless hand
would, serves it again and says what callers see. The blast-radius cases print
how many of 1,000 namespaces of 20 memories still answer every search fully
and correctly when 4 KiB of one engine file are garbled, before and after a
restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from scenarios.blast_radius import blast_radius
from scenarios.blast_radius import engine_file
from scenarios.blast_radius import garble

Outcome = tuple[str, bool]


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="faults-tmpfs-") as tmp:
        mount = Path(tmp)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", tmp], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", tmp], check=False)


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


async def _json(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    async with session.request(method, url, json=body) as reply:
        text = await reply.text()
        return reply.status, json.loads(text) if text else None


async def _seed(session: aiohttp.ClientSession, base: str, names: list[str], count: int) -> None:
    for name in names:
        await _json(session, "PUT", f"{base}/v1/namespaces/{name}", {"kind": "workspace"})
        for i in range(count):
            memory = {"content": f"fact {i} of {name}", "kind": "fact", "source": "agent"}
            await _json(session, "POST", f"{base}/v1/namespaces/{name}/memories", memory)


async def _listed(session: aiohttp.ClientSession, base: str, name: str) -> str:
    status, body = await _json(session, "POST", f"{base}/v1/search", {"namespaces": [name]})
    return f"{len(body['memories'])}" if status == 200 else f"{status}"


async def full_volume_restart(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    if os.geteuid() != 0:
        return "skipped: needs root to mount a tmpfs", True
    server.terminate()
    with tmpfs("512m") as volume:
        server.data_dir = volume / "data"
        server.start()
        server.wait_healthy()
        await _seed(session, server.base_url, ["workspace:full"], 20)
        server.terminate()
        filler = volume / "filler"
        filler.write_bytes(b"\0" * max(0, free_bytes(volume) - 5 * 1024 * 1024))
        if failed := _start(server):
            return f"with 5 MiB free: {failed}", False
        _, health = await _json(session, "GET", f"{server.base_url}/v1/health")
        full = await _listed(session, server.base_url, "workspace:full")
        filler.unlink()
        server.wait_healthy(30)
        _, healed = await _json(session, "GET", f"{server.base_url}/v1/health")
        later = await _listed(session, server.base_url, "workspace:full")
        server.terminate()
    observed = (
        f"5 MiB free: running, health {health['status']}, search {full};"
        f" room again: health {healed['status']}, search finds {later} of 20"
    )
    return observed, health["status"] == "degraded" and full == "503" and later == "20"


def _records_damage(kind: str) -> Any:
    async def case(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
        names = ["workspace:a", "workspace:b"]
        await _seed(session, server.base_url, names, 5)
        server.terminate()
        records = data / "store" / "namespaces.sqlite3"
        if kind == "truncated":
            records.write_bytes(b"")
        elif kind == "garbled header":
            records.write_bytes(os.urandom(100) + records.read_bytes()[100:])
        elif kind == "row deleted":
            _sql(data, "DELETE FROM namespaces WHERE name = ?", names[0])
        if failed := _start(server):
            return failed, False
        found = [await _listed(session, server.base_url, name) for name in names]
        return f"memories found: {found[0]} and {found[1]} of 5 each", found == ["5", "5"]

    return case


def _sql(data: Path, statement: str, *args: str) -> None:
    db = sqlite3.connect(data / "store" / "namespaces.sqlite3")
    with db:
        db.execute(statement, args)
    db.close()


def _epoch(data: Path, name: str) -> str:
    db = sqlite3.connect(data / "store" / "namespaces.sqlite3")
    (epoch,) = db.execute("SELECT epoch FROM namespaces WHERE name = ?", (name,)).fetchone()
    db.close()
    return str(epoch)


def _start(server: Any) -> str | None:
    """Start the server; None once it answers health, else what happened."""
    server.start()
    try:
        server.wait_healthy(60)
    except Exception:
        return f"did not start (exit {server.proc.poll()})"
    return None


async def _restart(server: Any) -> None:
    server.terminate()
    if failed := _start(server):
        raise RuntimeError(failed)


async def id_tracker_truncated(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    await _seed(session, server.base_url, ["workspace:a", "workspace:b"], 5)
    server.terminate()
    tracker = engine_file(data, "mutable_id_tracker.mappings")
    os.truncate(tracker, tracker.stat().st_size // 2)
    await _restart(server)
    _, health = await _json(session, "GET", f"{server.base_url}/v1/health")
    found = [await _listed(session, server.base_url, n) for n in ("workspace:a", "workspace:b")]
    said = health.get("message", "")
    observed = f"found {found[0]} and {found[1]} of 5; health {health['status']}: {said[:90]}"
    lost = found != ["5", "5"]
    return observed, not lost or health["status"] == "degraded"


async def wal_garbled(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    await _seed(session, server.base_url, ["workspace:a"], 15)
    server.kill()
    wal = sorted((data / "store").glob("**/wal/open-*"))[0]
    garble(wal, offset=2048, size=2048)
    if failed := _start(server):
        return failed, False
    _, health = await _json(session, "GET", f"{server.base_url}/v1/health")
    found = await _listed(session, server.base_url, "workspace:a")
    observed = f"found {found} of 15; health {health['status']}"
    return observed, found == "15" or health["status"] == "degraded"


async def purge_same_epoch(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    await _seed(session, server.base_url, ["workspace:keep"], 6)
    await _seed(session, server.base_url, ["workspace:drop"], 3)
    server.terminate()
    keep = _epoch(data, "workspace:keep")
    _sql(
        data,
        "UPDATE namespaces SET epoch = ?, record = '{x' WHERE name = ?",
        keep,
        "workspace:drop",
    )
    await _restart(server)
    status, _ = await _json(session, "DELETE", f"{server.base_url}/v1/namespaces/workspace:drop")
    await asyncio.sleep(1.0)  # the purge runs in the background
    found = await _listed(session, server.base_url, "workspace:keep")
    return f"DELETE of the damaged one {status}; the other keeps {found} of 6", found == "6"


async def only_unreadable(server: Any, session: aiohttp.ClientSession, data: Path) -> Outcome:
    await _seed(session, server.base_url, ["workspace:bad"], 3)
    server.terminate()
    _sql(data, "UPDATE namespaces SET record = '{x' WHERE name = ?", "workspace:bad")
    await _restart(server)
    status, body = await _json(
        session, "POST", f"{server.base_url}/v1/search", {"namespaces": ["workspace:bad"]}
    )
    return f"{status} {json.dumps(body)[:100]}", status == 503


CASES = {
    "17 restart, full volume": full_volume_restart,
    "18 blast radius, payload": blast_radius("payload_storage/page_0.dat"),
    "19 blast radius, vectors": blast_radius("vector_storage/vectors/chunk_0.mmap"),
    "27 blast radius, cut page": blast_radius("payload_storage/page_0.dat", "truncate"),
    "28 blast radius, cut vectors": blast_radius("vector_storage/vectors/chunk_0.mmap", "truncate"),
    "20 records truncated": _records_damage("truncated"),
    "21 records header garbled": _records_damage("garbled header"),
    "22 record row deleted": _records_damage("row deleted"),
    "23 id tracker truncated": id_tracker_truncated,
    "24 WAL garbled, kill -9": wal_garbled,
    "25 purge, shared epoch": purge_same_epoch,
    "26 search, only unreadable": only_unreadable,
}
