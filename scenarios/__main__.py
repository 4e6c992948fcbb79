"""Hostile input and faults against the real server: one line per case, what it answered.

    python -m scenarios             # this checkout
    python -m scenarios --repo DIR  # another checkout (a worktree of an older commit)

Each case drives a fresh server process (`harness/server_process.py`) over real
HTTP and prints what happened and whether that is what the contract intends
(`ok`) or not (`FAIL`). The disk-full case needs root (it mounts a small tmpfs)
and is skipped otherwise. The unit tests hold the same cases as assertions; this
script exists to show an operator, or a closing note, the before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from scenarios.connection_abuse import CASES as CONNECTION_CASES
from scenarios.connection_abuse import SERVER_OPTIONS
from scenarios.fault_matrix import all_pairs
from scenarios.full_disk import CASES as DISK_CASES
from scenarios.hostile_input import CASES as INPUT_CASES
from scenarios.store_damage import CASES as STORE_CASES

REPO_ROOT = Path(__file__).resolve().parents[1]
Outcome = tuple[str, bool]
Case = Callable[[Any, aiohttp.ClientSession, Path], Awaitable[Outcome]]

CASES: dict[str, Case] = {
    **DISK_CASES,  # cases 1 to 3: scenarios/full_disk.py
    **INPUT_CASES,  # cases 4 to 11: scenarios/hostile_input.py
    **CONNECTION_CASES,  # cases 7 to 9: scenarios/connection_abuse.py
    **STORE_CASES,  # cases 1 to 6: scenarios/store_damage.py
    "29 two faults at once": all_pairs,  # scenarios/fault_matrix.py
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
    from harness import server_process
    from harness.server_process import WIDE_SHARES
    from harness.server_process import ServerProcess

    server_process.REPO_ROOT = args.repo.resolve()  # the checkout whose server runs
    print(f"faults against {args.repo.resolve()}")
    for name, case in CASES.items():
        if args.cases and name.split()[0] not in args.cases:
            continue
        if name == "1 disk full" and (shutil.which("mount") is None or _not_root()):
            print(f"{name:<26} skipped: needs root to mount a tmpfs")
            continue
        env, open_files = SERVER_OPTIONS.get(name, ({}, None))
        env = {**WIDE_SHARES, **env}  # races and bursts in one namespace, not its share
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
