"""The blast radius of one damaged engine file, for scenarios/store_damage.py.

A store of 1,000 namespaces of 20 memories is filled through the checkout's own
`import` command (so that an older checkout can be measured the same way), 4 KiB
of one engine file are garbled or the file is cut, and the survey counts how many
namespaces still answer every search fully and correctly, before and after a restart.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
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
    from harness import server_process  # __main__.py points it at the checkout measured

    return Path(server_process.REPO_ROOT)


def garble(path: Path, offset: int = 0, size: int = 4096) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(os.urandom(size))


def engine_file(data: Path, relative: str) -> Path:
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
        target = engine_file(data, relative)
        served = [NAMESPACES]
        if damage == "garble":
            garble(target)
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
