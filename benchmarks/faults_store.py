"""Store faults for benchmarks/faults.py (issue 21, cases 1 to 6): damage, full volumes.

Each case stops the server faults.py started, prepares its own data directory
(filled through the checkout's own `import` command, so that an older checkout
can be measured the same way), damages it as a bad disk or a careless hand
would, serves it again and says what callers see. The blast-radius cases print
how many of 1,000 namespaces of 20 memories still answer every search fully
and correctly when 4 KiB of one engine file are garbled, before and after a
restart.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import os
import random
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

NAMESPACES, MEMORIES = 1000, 20
DIMENSION = 384
STAMP = "2026-11-20T10:00:00.000000Z"
Outcome = tuple[str, bool]


def _vector(rng: random.Random) -> str:
    values = [rng.gauss(0, 1) for _ in range(DIMENSION)]
    norm = sum(v * v for v in values) ** 0.5
    return base64.b64encode(struct.pack(f"<{DIMENSION}f", *(v / norm for v in values))).decode()


def corpus_file(path: Path, namespaces: int, memories: int) -> dict[str, set[str]]:
    """An export file of `namespaces` x `memories` (random unit vectors); ids per namespace."""
    rng = random.Random(21)
    names = [f"workspace:w{n:04d}" for n in range(namespaces)]
    expected: dict[str, set[str]] = {}
    with gzip.open(path, "wt", encoding="utf-8") as out:
        header = {
            "type": "header",
            "format": "memory-plugin-vector-export",
            "version": 1,
            "fingerprint": "all-MiniLM-L6-v2/torch",
            "dimension": DIMENSION,
            "vector_encoding": "float32-le-base64",
            "exported_at": STAMP,
            "source": "qdrant-edge",
        }
        lines = [header]
        lines += [
            {"type": "namespace", "name": name, "kind": "workspace", "created_at": STAMP}
            | {"expires_at": None, "metadata": None}
            for name in names
        ]
        for line in lines:
            out.write(json.dumps(line) + "\n")
        for n, name in enumerate(names):
            expected[name] = set()
            for i in range(memories):
                memory_id = f"{n:08x}-0000-4000-8000-{i:012x}"
                expected[name].add(memory_id)
                memory = {
                    "type": "memory",
                    "namespace": name,
                    "id": memory_id,
                    "content": f"note {i} of {name}: the deploy window is on day {i % 7}",
                    "kind": "fact",
                    "source": "agent",
                    "created_at": STAMP,
                    "pin": False,
                    "expires_at": None,
                    "propagation": None,
                    "vector": _vector(rng),
                }
                out.write(json.dumps(memory) + "\n")
        end = {"type": "end", "namespaces": namespaces, "memories": namespaces * memories}
        out.write(json.dumps(end | {"finished_at": STAMP}) + "\n")
    return expected


def import_into(repo: Path, data: Path, export: Path) -> None:
    env = dict(os.environ, MEMORY_PLUGIN_DATA_DIR=str(data))
    command = [sys.executable, "-m", "plugin.cli", "import", "--in", str(export)]
    subprocess.run(command, cwd=repo, env=env, check=True, capture_output=True)


async def served(base: str, name: str, ids: set[str], session: aiohttp.ClientSession) -> str:
    """'ok' when a listing and a search both return exactly `ids`; else 503 or 'wrong'."""
    for body in ({}, {"query": "the deploy window"}):
        request = {"namespaces": [name], "limit": 50} | body
        async with session.post(f"{base}/v1/search", json=request) as reply:
            found = await reply.json()
            if reply.status == 503:
                return "503 naming it" if name in found.get("message", "") else "503"
            if reply.status != 200 or {m["id"] for m in found["memories"]} != ids:
                return f"wrong ({reply.status})"
    return "ok"


async def survey(base: str, expected: dict[str, set[str]]) -> dict[str, int]:
    """How every namespace answers, counted by kind of answer."""
    counts: dict[str, int] = {}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        queue = list(expected.items())

        async def worker() -> None:
            while queue:
                name, ids = queue.pop()
                verdict = await served(base, name, ids, session)
                counts[verdict] = counts.get(verdict, 0) + 1

        await asyncio.gather(*(worker() for _ in range(8)))
        async with session.get(f"{base}/v1/health") as reply:
            health = await reply.json()
    unreadable = health.get("unreadable_namespaces", 0)
    counts[f"health {health.get('status')} counting unreadable"] = unreadable
    return counts


def _repo() -> Path:
    from tests import server_process  # faults.py points it at the checkout measured

    return Path(server_process.REPO_ROOT)


def _garble(path: Path, offset: int = 0, size: int = 4096) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(os.urandom(size))


def _engine_file(data: Path, relative: str) -> Path:
    """The first file named `relative` in a segment of the store (the first shard's, if any)."""
    found = sorted((data / "store").glob(f"**/segments/*/{relative}"))
    return found[0]


def _report(label: str, counts: dict[str, int], total: int) -> str:
    ok = counts.get("ok", 0)
    rest = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()) if k != "ok")
    return f"{label}: {ok}/{total} served fully ({100 * ok / total:.1f} %); {rest}"


def blast_radius(relative: str, damage: str = "garble") -> Any:
    """4 KiB garbled in `relative` while serving, then a restart; or, with
    damage="truncate", the file cut to its first 4 KiB while stopped."""

    async def case(server: Any, _: aiohttp.ClientSession, data: Path) -> Outcome:
        server.terminate()
        shutil.rmtree(data, ignore_errors=True)
        export = data.parent / "corpus.jsonl.gz"
        expected = corpus_file(export, NAMESPACES, MEMORIES)
        started = time.monotonic()
        import_into(_repo(), data, export)
        built = time.monotonic() - started
        server.start()
        server.wait_healthy(120)
        before = await survey(server.base_url, expected)
        lines = [
            f"store of {NAMESPACES}x{MEMORIES} imported in {built:.0f} s",
            _report("undamaged", before, NAMESPACES),
        ]
        target = _engine_file(data, relative)
        served = [NAMESPACES]
        if damage == "garble":
            _garble(target)
            running = await survey(server.base_url, expected)
            lines.append(_report("garbled while serving", running, NAMESPACES))
            served.append(running.get("ok", 0))
        server.terminate()
        if damage == "truncate":
            os.truncate(target, 4096)
        try:
            server.start()
            server.wait_healthy(120)
            after = await survey(server.base_url, expected)
        except Exception as error:
            after = {f"no start: {type(error).__name__}": NAMESPACES}
        lines.append(_report(f"{damage}d, after a restart", after, NAMESPACES))
        served.append(after.get("ok", 0))
        return "\n    ".join(lines), min(served) >= 0.9 * NAMESPACES

    return case


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
    tracker = _engine_file(data, "mutable_id_tracker.mappings")
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
    _garble(wal, offset=2048, size=2048)
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
