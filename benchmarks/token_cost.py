"""What the default ranking's token vectors cost a write against `hybrid`: commits a second
and bytes on disk.

    python -m benchmarks.token_cost [--rounds 2]

Writes LoCoMo's development half (both memory modes, every memory committed with an
explicit id over HTTP, 8 in flight, as benchmarks/retrieval.py does) through a server of
this checkout with MEMORY_PLUGIN_SEARCH=hybrid (no token vectors) and one on defaults
(which computes and keeps them, as `rerank` does), in turns (A B B A ...: drift hits both
alike), each into a fresh data directory. Prints each round's commits a second, the medians
and their ratio, and the store's size on disk after a clean stop (every shard flushed), per
memory (`du`: blocks held, sparse files count what they hold), with the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import ranking_env
from benchmarks.retrieval import write_all
from harness.server_process import ServerProcess

MODES = ("hybrid", "default")


def disk_bytes(path: Path) -> int:
    found = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(found.stdout.split()[0]) * 1024


def one_round(mode: str, work: Path, conversations: list[locomo.Conversation]) -> tuple[float, int]:
    """Commits a second and bytes on disk for one write of every memory."""
    data = work / "data"
    with ServerProcess(data, work / "server.log", env=ranking_env(mode)) as server:
        server.start()
        server.wait_healthy()
        started = time.perf_counter()
        count = asyncio.run(write_all(server.base_url, conversations))
        rate = count / (time.perf_counter() - started)
        server.terminate()
    return rate, disk_bytes(data / "store")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    memories = sum(len(c.memories[mode]) for c in conversations for mode in locomo.MODES)
    print(f"token cost on {args.data.name}: {memories} memories ({machine()})")
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    sizes: dict[str, int] = {}
    order = [m for r in range(args.rounds) for m in MODES[:: 1 - 2 * (r % 2)]]
    for mode in order:
        with tempfile.TemporaryDirectory(prefix="bench-token-cost-") as tmp:
            rate, size = one_round(mode, Path(tmp), conversations)
        rates[mode].append(rate)
        sizes[mode] = size
        print(f"  {mode:<7} {rate:6.1f} commits/s  {size / memories / 1024:6.1f} KiB/memory")
    hybrid, default = (statistics.median(rates[mode]) for mode in MODES)
    print(
        f"median commits/s: hybrid {hybrid:.1f}, default {default:.1f} ({default / hybrid:.2f}x;"
        f" at least 0.95x: {'met' if default >= 0.95 * hybrid else 'NOT met'})"
    )
    ratio = sizes["default"] / sizes["hybrid"]
    print(
        f"on disk per memory: hybrid {sizes['hybrid'] / memories / 1024:.1f} KiB, default"
        f" {sizes['default'] / memories / 1024:.1f} KiB ({ratio:.1f}x; at most 3x:"
        f" {'met' if ratio <= 3 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
