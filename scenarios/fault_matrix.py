"""Two faults at once: every pair of six faults applied to a stopped store,
then a start; what every namespace answers, and what health says.

    python -m scenarios.fault_matrix             # this checkout: all 15 pairs, then ISSUE_CASE
    python -m scenarios.fault_matrix --repo DIR  # another checkout (before/after)
    python -m scenarios.fault_matrix "shard+full" ...

A pair passes when the server starts; no namespace answers with other or fewer
memories than were written (each lists all of them or answers 503); health is
never `ok` while a namespace is not whole; and every namespace of a shard no
engine fault touched is served whole. With a full volume the same holds after
space returns (the server is not restarted). Needs root for the tmpfs of the
full-volume pairs (they are skipped otherwise). About 10 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from scenarios.blast_radius import garble
from scenarios.fault_pairs import DAMAGE
from scenarios.fault_pairs import FAULTS
from scenarios.fault_pairs import NAMESPACES
from scenarios.fault_pairs import WAL_MEMORIES
from scenarios.fault_pairs import Store
from scenarios.fault_pairs import fill_volume
from scenarios.fault_pairs import import_store
from scenarios.fault_pairs import mount_tmpfs
from scenarios.fault_pairs import unmount

REPO_ROOT = Path(__file__).resolve().parents[1]
ISSUE_CASE = ("garbled page", "records cut")  # the combination that prompted the matrix


async def _write_wal_namespace(base: str, store: Store) -> None:
    async with aiohttp.ClientSession() as session:
        url = f"{base}/v1/namespaces/{store.wal}"
        async with session.put(url, json={"kind": "workspace"}) as reply:
            assert reply.status == 200, reply.status
        ids = {f"7a1e0000-0000-4000-8000-{i:012x}" for i in range(WAL_MEMORIES)}
        for i, memory_id in enumerate(sorted(ids)):
            body = {"id": memory_id, "content": f"wal note {i}", "kind": "fact", "source": "agent"}
            for _ in range(5):  # a busy machine may see a 503 (backend deadline): again, by id
                async with session.post(f"{url}/memories", json=body) as reply:
                    written = await reply.json()
                if reply.status in (200, 201):
                    break
            else:
                raise RuntimeError(f"seeding: commit answered {reply.status} {written}")
        store.expected[store.wal] = ids


async def _answer(session: aiohttp.ClientSession, base: str, name: str, ids: set[str]) -> str:
    request = {"namespaces": [name], "limit": 50}
    async with session.post(f"{base}/v1/search", json=request) as reply:
        body = await reply.json()
    if reply.status == 503:
        message = body.get("message", "")
        if "data volume is full" in message:
            return "503 disk full"
        return "503" if name in message else "503 unnamed"
    if reply.status == 200 and {m["id"] for m in body["memories"]} == ids:
        return "whole"
    return "wrong"


async def survey(base: str, store: Store) -> tuple[dict[str, str], str]:
    """Every namespace's answer, and health's status (asked after the namespaces)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        answers = {
            name: await _answer(session, base, name, ids) for name, ids in store.expected.items()
        }
        async with session.get(f"{base}/v1/health") as reply:
            health = (await reply.json()).get("status", str(reply.status))
    return answers, health


def _health(base: str) -> str:
    async def ask() -> str:
        async with aiohttp.ClientSession() as session, session.get(f"{base}/v1/health") as r:
            return str((await r.json()).get("status", r.status))

    return asyncio.run(ask())


def verdict(
    store: Store, faults: tuple[str, ...], answers: dict[str, str], health: str, *, full: bool
) -> str:
    """While the volume is full nothing can be opened: a 503 with the disk's message is the
    answer then, and "readable" is judged once there is room again."""
    counts = {kind: sum(1 for a in answers.values() if a == kind) for kind in set(answers.values())}
    readable = store.readable(faults)
    served = sum(1 for name in readable if answers[name] == "whole")
    fine = {"whole", "503", "503 disk full"} if full else {"whole", "503"}
    bad = [
        *(["wrong answers"] if set(answers.values()) - fine else []),
        *(["health ok while not whole"] if health == "ok" and set(counts) - {"whole"} else []),
        *(["readable not served"] if served < len(readable) and not full else []),
    ]
    found = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
    return f"{found}; health {health}; readable {served}/{len(readable)}" + (
        f"  FAIL: {', '.join(bad)}" if bad else "  ok"
    )


def run_pair(repo: Path, root: Path, faults: tuple[str, ...]) -> str:
    from harness.server_process import ServerError
    from harness.server_process import ServerProcess

    full = "full" in faults
    volume = root / "volume"
    if full:
        mount_tmpfs(volume, "2g")
    volume.mkdir(exist_ok=True)
    try:
        store = Store(volume / "data")
        import_store(repo, store)
        with ServerProcess(store.data, root / "server.log") as server:
            server.start()
            server.wait_healthy(120)
            asyncio.run(_write_wal_namespace(server.base_url, store))
            if "WAL garbled" in faults:
                server.kill()  # its writes are in the WAL only
            else:
                server.terminate()
            for fault in faults:
                if fault in DAMAGE:
                    DAMAGE[fault](store)
            if "garbled page" in faults:
                page = max(
                    store.data.glob("store/shards/*/segments/*/payload_storage/page_*.dat"),
                    key=lambda path: path.stat().st_size,
                )
                garble(page)
                store.garbled_shard = int(page.relative_to(store.data).parts[2])
            filler = fill_volume(store) if full else None
            server.start()
            try:
                server.wait_healthy(120)
            except ServerError:
                return f"EXIT {server.proc.poll() if server.proc else '?'}  FAIL: no start"
            at_start = _health(server.base_url)
            answers, health = asyncio.run(survey(server.base_url, store))
            line = f"health at start {at_start}; "
            line += verdict(store, faults, answers, health, full=full)
            if filler is not None:
                filler.unlink()
                _health(server.base_url)  # the check that opens the shards
                answers, health = asyncio.run(survey(server.base_url, store))
                line += "\n      room again: "
                line += verdict(store, faults, answers, health, full=False)
            return line
    finally:
        if full:
            unmount(volume)


def run_pairs(repo: Path, chosen: set[tuple[str, ...]], out: Any = print) -> bool:
    """Run the pairs (all when `chosen` is empty), one line each; whether all passed."""
    passed = True
    for faults in [ISSUE_CASE, *itertools.combinations(FAULTS, 2)]:
        if chosen and faults not in chosen:
            continue
        label = " + ".join(faults)
        if "full" in faults and os.geteuid() != 0:
            out(f"{label:<32} skipped: needs root to mount a tmpfs")
            continue
        with tempfile.TemporaryDirectory(prefix="faults-pair-") as tmp:
            try:
                line = run_pair(repo, Path(tmp), faults)
            except Exception as error:
                line = f"probe error: {error!r}  FAIL"
        passed = passed and "FAIL" not in line
        out(f"{label:<32} {line}")
    return passed


async def all_pairs(server: Any, _: aiohttp.ClientSession, __: Path) -> tuple[str, bool]:
    """Case 29 of scenarios/__main__.py: the whole matrix (its own servers and stores)."""
    from harness import server_process

    server.terminate()
    lines: list[str] = []
    passed = await asyncio.to_thread(run_pairs, Path(server_process.REPO_ROOT), set(), lines.append)
    return "\n    ".join(["every pair of two faults, then a start:", *lines]), passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO_ROOT)
    parser.add_argument("pairs", nargs="*", help='pairs to run, as "shard+full" (default: all)')
    args = parser.parse_args()
    from harness import server_process

    server_process.REPO_ROOT = args.repo.resolve()
    print(f"fault pairs against {args.repo.resolve()}: {NAMESPACES} namespaces x 5 memories,")
    print(f"one more with {WAL_MEMORIES} written over HTTP just before the stop", flush=True)
    chosen = {tuple(p.split("+")) for p in args.pairs}
    run_pairs(args.repo.resolve(), chosen, lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
